/* Per-call latency of a SavedModel signature through TensorFlow's C API, which loads it
 * with the C++ SavedModel loader (as TF Serving and C/C++/Go/Java clients do), with no
 * Python in the timed loop. tfsac/deploy/latency.py compiles and runs it:
 *
 *   saved_model_latency DIR INPUT_OP INPUT_INDEX OUTPUT_OP OUTPUT_INDEX OBS_DIM BATCH CALLS
 *
 * prints "p50_us p99_us" of CALLS timed TF_SessionRun calls (after 50 untimed ones), each
 * feeding a [BATCH, OBS_DIM] float32 tensor of values in [-1, 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorflow/c/c_api.h"

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void check(TF_Status *status, const char *what) {
  if (TF_GetCode(status) != TF_OK) {
    fprintf(stderr, "%s: %s\n", what, TF_Message(status));
    exit(1);
  }
}

static void no_free(void *data, size_t len, void *arg) {}

int main(int argc, char **argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: %s DIR IN_OP IN_INDEX OUT_OP OUT_INDEX OBS_DIM BATCH CALLS\n",
            argv[0]);
    return 2;
  }
  const char *dir = argv[1];
  int in_index = atoi(argv[3]), out_index = atoi(argv[5]);
  int64_t dims[2] = {atoi(argv[7]), atoi(argv[6])};
  int calls = atoi(argv[8]);
  TF_Status *status = TF_NewStatus();
  TF_Graph *graph = TF_NewGraph();
  TF_SessionOptions *options = TF_NewSessionOptions();
  const char *tags[] = {"serve"};
  TF_Session *session =
      TF_LoadSessionFromSavedModel(options, NULL, dir, tags, 1, graph, NULL, status);
  check(status, "TF_LoadSessionFromSavedModel");
  TF_Operation *in_op = TF_GraphOperationByName(graph, argv[2]);
  TF_Operation *out_op = TF_GraphOperationByName(graph, argv[4]);
  if (in_op == NULL || out_op == NULL) {
    fprintf(stderr, "no operation %s or %s in the graph\n", argv[2], argv[4]);
    return 1;
  }
  TF_Output input = {in_op, in_index}, output = {out_op, out_index};
  size_t count = (size_t)(dims[0] * dims[1]);
  float *values = malloc(count * sizeof(float));
  srand(0);
  for (size_t i = 0; i < count; i++) values[i] = 2.0f * rand() / ((float)RAND_MAX + 1) - 1.0f;
  double *micros = malloc(calls * sizeof(double));
  for (int i = -50; i < calls; i++) {
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    /* A client builds its request tensor in every call: counted, as in the Python rows. */
    TF_Tensor *feed =
        TF_NewTensor(TF_FLOAT, dims, 2, values, count * sizeof(float), no_free, NULL);
    TF_Tensor *fetched = NULL;
    TF_SessionRun(session, NULL, &input, &feed, 1, &output, &fetched, 1, NULL, 0, NULL,
                  status);
    check(status, "TF_SessionRun");
    TF_DeleteTensor(feed);
    TF_DeleteTensor(fetched);
    clock_gettime(CLOCK_MONOTONIC, &end);
    if (i >= 0)
      micros[i] = (end.tv_sec - start.tv_sec) * 1e6 + (end.tv_nsec - start.tv_nsec) / 1e3;
  }
  qsort(micros, calls, sizeof(double), compare);
  printf("%.2f %.2f\n", micros[calls / 2], micros[(int)(calls * 0.99)]);
  TF_CloseSession(session, status);
  TF_DeleteSession(session, status);
  TF_DeleteGraph(graph);
  TF_DeleteSessionOptions(options);
  TF_DeleteStatus(status);
  free(values);
  free(micros);
  return 0;
}
