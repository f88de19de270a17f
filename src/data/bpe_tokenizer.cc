#include "data/bpe_tokenizer.h"
