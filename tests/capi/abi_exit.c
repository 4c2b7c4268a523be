/* Exit with generations running: the process must end cleanly (status 0) when main returns while an
 * engine generates, whether its events go to a callback, to polling, or to a completion queue, and
 * whether the engine was freed or left for exit. Usage: abi_exit MODEL_DIR callback|poll|queue. */
#include "deepinfer.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_events = 0;

static void on_event(void *user, di_event *ev) {
  (void)user;
  di_event_free(ev);
  pthread_mutex_lock(&g_mu);
  ++g_events;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

static int check(di_error *err, const char *what) {
  if (!err) return 1;
  fprintf(stderr, "%s: %s\n", what, di_error_message(err));
  di_error_free(err);
  return 0;
}

int main(int argc, char **argv) {
  di_engine_config *cfg = NULL;
  di_engine *engine = NULL;
  di_session *s[3] = {NULL, NULL, NULL};
  di_sampling *sp = NULL;
  di_queue *queue = NULL;
  di_event *ev = NULL;
  int i;
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL_DIR callback|poll|queue\n", argv[0]);
    return 2;
  }
  if (!check(di_engine_config_create(&cfg), "config") ||
      !check(di_engine_config_set_model_path(cfg, argv[1], strlen(argv[1])), "model path") ||
      !check(di_engine_config_set_device(cfg, DI_DEVICE_CPU), "device") ||
      !check(di_engine_config_set_threads(cfg, 2), "threads") || !check(di_engine_create(cfg, &engine), "engine") ||
      !check(di_sampling_create(&sp), "sampling") || !check(di_sampling_set_max_tokens(sp, 100000), "max_tokens") ||
      !check(di_sampling_set_ignore_eos(sp, 1), "ignore_eos") || !check(di_queue_create(&queue), "queue"))
    return 1;
  for (i = 0; i < 3; ++i) {
    if (!check(di_session_create(engine, &s[i]), "session")) return 1;
    if (!strcmp(argv[2], "callback") && !check(di_session_set_callback(s[i], on_event, NULL), "callback")) return 1;
    if (!strcmp(argv[2], "queue") && !check(di_session_set_queue(s[i], queue, (uint64_t)i), "queue")) return 1;
    if (!check(di_session_add_text(s[i], "def main():", 11, DI_TEXT_PLAIN), "text") ||
        !check(di_session_generate(s[i], sp), "generate"))
      return 1;
  }
  /* Let the generations get going, then leave with everything running and nothing freed. */
  if (!strcmp(argv[2], "poll")) {
    if (!check(di_session_poll(s[0], 60000, &ev), "poll")) return 1;
    di_event_free(ev);
  } else if (!strcmp(argv[2], "queue")) {
    uint64_t tag = 0;
    if (!check(di_queue_poll(queue, 60000, &ev, &tag), "queue poll")) return 1;
    di_event_free(ev);
  } else {
    pthread_mutex_lock(&g_mu);
    while (g_events < 3) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
  }
  di_engine_config_free(cfg);
  return 0;
}
