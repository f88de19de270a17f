// BpeTokenizer: placeholder until the byte-level BPE tokenizer lands.
#pragma once
