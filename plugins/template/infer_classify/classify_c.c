/* classify_c: the inference library from C11 (tp/infer/infer.h), the same program as classify.cpp:
 *   classify_c [--plugin-dir DIR] EXPORT IMAGE...
 * prints, for each image, its path, its best class and that class's probability, tab-separated.
 * All images run as one batch (`host predict` gives the same bits at an eval.batch_size of at
 * least their number). The plugin directory defaults to the installed host's (TORCHHOST_PLUGIN_DIR,
 * set by CMakeLists.txt; none inside the torchhost tree). Every call returns a tp_status; on failure tp_infer_last_error() holds
 * the message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp/infer/infer.h"

/* Prints `value` with the fewest significant digits that read back to it, as `host predict` writes
 * its csv. */
static void print_shortest(float value) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    snprintf(text, sizeof text, "%.*g", digits, (double)value);
    if (strtof(text, NULL) == value) break;
  }
  printf("%s", text);
}

int main(int argc, char **argv) {
  const char *plugin_dir = TORCHHOST_PLUGIN_DIR;
  int first = 1;
  if (argc > 2 && strcmp(argv[1], "--plugin-dir") == 0) {
    plugin_dir = argv[2];
    first = 3;
  }
  if (argc - first < 2 || plugin_dir[0] == '\0') {
    fprintf(stderr, "usage: classify_c [--plugin-dir DIR] EXPORT IMAGE...\n"
                    "--plugin-dir: where the export's plugins are (default: '%s'; required if '').\n",
            TORCHHOST_PLUGIN_DIR);
    return 2;
  }
  const char *const *images = (const char *const *)&argv[first + 1];
  const uint32_t count = (uint32_t)(argc - first - 1);

  tp_infer_model_t *model = NULL;
  tp_infer_result_t *result = NULL;
  tp_status status = tp_infer_open(argv[first], "cpu", plugin_dir, &model);
  if (status == TP_OK) status = tp_infer_run_files(model, images, count, 1, &result);
  for (uint32_t i = 0; status == TP_OK && i < count; ++i) {
    const char *name = NULL;
    int64_t index = 0;
    float probability = 0.0f;
    if (tp_infer_result_class_count(result, i) == 0) {
      fprintf(stderr, "classify_c: %s is no classifier (no logits output)\n", argv[first]);
      status = TP_ERR_UNSUPPORTED;
      break;
    }
    status = tp_infer_result_class(result, i, 0, &index, &name, &probability);
    if (status != TP_OK) break;
    if (name[0] != '\0') printf("%s\t%s\t", images[i], name);
    else printf("%s\t%lld\t", images[i], (long long)index);
    print_shortest(probability);
    printf("\n");
  }
  if (status != TP_OK && status != TP_ERR_UNSUPPORTED) fprintf(stderr, "%s\n", tp_infer_last_error());
  tp_infer_result_free(result); /* both accept NULL */
  tp_infer_close(model);
  return status == TP_OK ? 0 : 1;
}
