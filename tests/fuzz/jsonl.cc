// jsonl: JSONL documents as `headroom data convert` reads them
// (JsonlDocumentReader, SAX-parsed), once as token ids with labels and once
// as text records; gzip input goes through the same reader.
#include "data/jsonl_documents.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string path = fuzz::write_file("train.jsonl", fuzz::as_text(data, size));
  JsonlSchema ids;
  ids.vocab_size = 1000;
  ids.labels_field = "labels";
  JsonlSchema text;
  text.vocab_size = 1000;
  text.ids_field = "";
  text.mask_field = "";
  text.text_field = "text";
  for (const JsonlSchema& schema : {ids, text}) {
    fuzz::swallow_usage_errors([&] {
      JsonlDocumentReader reader(path, schema);
      JsonlRecord record;
      while (reader.next(record)) {
      }
    });
  }
  return 0;
}
