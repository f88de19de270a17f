// The knob catalogue: the schema keys that can lower a run's memory, each
// as data beside the keys it turns (config/schema.cc): the key, the values
// worth planning for a config, how far they move the training, and what
// they cost beyond memory. The settings a value needs beside it (offload
// needs zero.stage >= 1, NF4 needs LoRA) are not listed here: they are the
// companions of the config rule the value would break (config/rules.cc),
// so a rule and what satisfies it are written once.
//
// advice/advice.h plans each knob of the catalogue after an out-of-memory
// plan or run; this file only says which changes there are.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace headroom {

// How far a change moves the training away from the one asked for. The
// ranking prefers a lower tier at any cost: a run that trains the same
// model on the same tokens beats a cheaper one that does not.
enum class KnobEffect : uint8_t {
  kSameTraining,     // the same updates (up to float summation order): recompute, sharding, offload
  kSameGlobalBatch,  // the same tokens per optimizer step, split differently (or logits in bf16)
  kChangesTraining,  // other tokens (truncation) or other parameters trained (LoRA)
};

// "same training", "same global batch", "changes the training".
std::string_view name_of(KnobEffect effect);

// What a knob's values may depend on beyond the config.
struct KnobContext {
  int world_size = 1;
  // The dataset's document lengths (data.max_sample_tokens cuts at their
  // 99th percentile); empty when unknown.
  const std::vector<int64_t>& lengths;
};

// One value of a knob worth planning.
struct KnobChoice {
  std::string what;  // "checkpoint every block's activations"
  // The --set values: the knob's key first, then the partners that make the
  // choice what it says (a halved micro-batch's doubled accumulation).
  std::vector<std::string> sets;
  std::string note;  // what it changes beyond memory
};

// A knob: one schema key and the values of it worth planning.
struct KnobSpec {
  std::string key;  // a key of config_schema(): "checkpoint.activations"
  KnobEffect effect = KnobEffect::kSameTraining;
  // The values for `config`: only those that differ from its own and can
  // lower memory (none when the key is already as low as it goes).
  std::function<std::vector<KnobChoice>(const ExperimentConfig&, const KnobContext&)> choices;
};

// The --set values of a change that turns LoRA on, set in full so that the
// advice trains what it says whatever the config's lora keys hold: r = 16
// on q_proj and v_proj (PEFT's usual start, and QLoRA's paper's smallest).
const std::vector<std::string>& adapter_sets();

// Every knob, in the order the advice lists changes of equal rank.
const std::vector<KnobSpec>& knob_table();

// One change from the catalogue, ready to plan.
struct Knob {
  std::string what;                    // "activation checkpointing of every block"
  std::vector<std::string> overrides;  // the --set values, in order
  KnobEffect effect = KnobEffect::kSameTraining;
  std::string note;  // what it changes beyond memory, e.g. "truncates 12 of 2000 documents"
};

// The knobs worth planning for `config` at `world_size` ranks: each choice
// of knob_table(), its overrides preceded by the companions of every rule
// it would break (as a user sets them: the requirement first). A choice
// that breaks a rule without companions does not apply and is left out.
std::vector<Knob> knob_catalogue(const ExperimentConfig& config, int world_size,
                                 const std::vector<int64_t>& lengths);

}  // namespace headroom
