/* Corpus replay without libFuzzer: runs LLVMFuzzerTestOneInput once per file argument.
 * Built with any compiler (+ASan/UBSan) so the corpus is exercised where clang is absent. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  int n = 0;
  for (int i = 1; i < argc; i++) {
    FILE* f = fopen(argv[i], "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", argv[i]); return 2; }
    size_t cap = 4096, len = 0, got;
    uint8_t* buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
      len += got;
      if (len == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) return 3;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    n++;
  }
  printf("replayed %d inputs\n", n);
  return 0;
}
