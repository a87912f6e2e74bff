// paramclient: a stand-in for a `ros2 param` client for the ros2 package's
// tests. It calls one rcl_interfaces parameter service the way
// rmw_cyclonedds (ROS 2 Humble/Jazzy) implements a service client, written
// against the raw Cyclone DDS C API and the idlc-generated types in
// rcl_interfaces.h only (none of zh_dds.c). A test tool, not production
// code. Cyclone reads its configuration from CYCLONEDDS_URI.
//
//   paramclient DOMAIN NODE SERVICE [ARGS...]
//     NODE: the node's fully qualified name, e.g. /robot1/zerohop_agent.
//     SERVICE ARGS:
//       list DEPTH [PREFIX...]       rcl_interfaces/srv/ListParameters
//       get NAME...                  GetParameters
//       types NAME...                GetParameterTypes
//       describe NAME...             DescribeParameters
//       set NAME=VALUE...            SetParameters
//       set_atomically NAME=VALUE... SetParametersAtomically
//     VALUE is a string; bool:V, int:V or double:V give the other types
//     (`ros2 param set` reads them from YAML: 0.5 is a double, 1 an int).
//
// Prints `available` once the service is, then the reply, one line per
// item with TAB-separated fields, then `done`:
//   list:     name\tNAME ... then prefix\tPREFIX ...
//   get:      value\tTYPE\tBOOL\tINTEGER\tDOUBLE(%.17g)\tSTRING\tN_STRING_ARRAY
//   types:    type\tTYPE
//   describe: descriptor\tNAME\tTYPE\tREAD_ONLY\tDYNAMIC_TYPING\tDESCRIPTION
//             \tADDITIONAL_CONSTRAINTS\tN_FLOATING_RANGES\tN_INTEGER_RANGES,
//             then range\tFROM\tTO\tSTEP for each floating-point range
//   set, set_atomically: result\tSUCCESSFUL\tREASON
// A reply for another request prints `ignored reply for another client`.
//
// Exit status: 0 done, 1 usage or DDS error, 2 service not available
// (10 s), 3 no reply (10 s).
//
// With PARAMCLIENT_RAW=1 it prints the first reply as the bytes that came
// on the wire (`guid\t<client_guid, 16 hex digits>` then `raw\t<hex>`,
// the CDR encapsulation header included) instead of decoding it: what
// tests compare with CDR built by hand.
//
// With PARAMCLIENT_REPEAT=N (get, types, describe) the names are asked N
// times over in one request: a request far larger than a real client's.
// It expects no reply then: it prints `no reply` and `done` after 2 s.
//
// With PARAMCLIENT_DEAF=1 the reply reader carries another clientid than
// the request writer: a client whose reply reader the server cannot find.
// It waits 2 s for a reply and, when none comes, prints `no reply` and
// `done` and exits 0 (a reply that does come is printed as usual).
//
// What it mirrors in rmw_cyclonedds (rmw_node.cpp):
//   - create_cdds_client: topics "rq<node>/<service>Request" and
//     "rr<node>/<service>Reply"; RELIABLE, VOLATILE, KEEP_LAST QoS with
//     USER_DATA "clientid=<id>;" on both endpoints, autodispose off and
//     XCDR1 on the writer.
//   - rmw_service_server_is_available / check_for_service_reader_writer:
//     the service is there when requests and replies both have matches and,
//     if a request reader advertises a "serviceid", a reply writer carries
//     the same one.
//   - rmw_send_request: the request header is the request writer's instance
//     handle and a sequence number (here the first two struct fields).
//   - rmw_take_response: replies whose header names another writer or
//     sequence number are not ours and are dropped.
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dds/dds.h"
#include "dds/ddsi/ddsi_serdata.h"
#include "rcl_interfaces.h"

#define WAIT DDS_SECS(10)
#define CLIENT_ID "clientid=1.2.3.4;"
#define MAXMATCH 64

enum kind { LIST, GET, TYPES, DESCRIBE, SET, SET_ATOMICALLY };

static const struct service {
  const char *cmd, *suffix;
  const dds_topic_descriptor_t *request, *reply;
} services[] = {
  [LIST] = {"list", "list_parameters", &rcl_interfaces_srv_dds__ListParameters_Request__desc,
            &rcl_interfaces_srv_dds__ListParameters_Response__desc},
  [GET] = {"get", "get_parameters", &rcl_interfaces_srv_dds__GetParameters_Request__desc,
           &rcl_interfaces_srv_dds__GetParameters_Response__desc},
  [TYPES] = {"types", "get_parameter_types", &rcl_interfaces_srv_dds__GetParameterTypes_Request__desc,
             &rcl_interfaces_srv_dds__GetParameterTypes_Response__desc},
  [DESCRIBE] = {"describe", "describe_parameters", &rcl_interfaces_srv_dds__DescribeParameters_Request__desc,
                &rcl_interfaces_srv_dds__DescribeParameters_Response__desc},
  [SET] = {"set", "set_parameters", &rcl_interfaces_srv_dds__SetParameters_Request__desc,
           &rcl_interfaces_srv_dds__SetParameters_Response__desc},
  [SET_ATOMICALLY] = {"set_atomically", "set_parameters_atomically",
                      &rcl_interfaces_srv_dds__SetParametersAtomically_Request__desc,
                      &rcl_interfaces_srv_dds__SetParametersAtomically_Response__desc},
};

// header is rmw_cyclonedds' cdds_request_header_t, the first two fields
// of every request and response struct.
struct header {
  uint64_t client_guid;
  int64_t sequence_number;
};

static void die(const char *what, dds_return_t rc)
{
  fprintf(stderr, "paramclient: %s: %s\n", what, dds_strretcode(rc));
  exit(1);
}

static void usage(void)
{
  fprintf(stderr, "usage: paramclient DOMAIN NODE list DEPTH [PREFIX...]\n"
                  "       paramclient DOMAIN NODE get|types|describe NAME...\n"
                  "       paramclient DOMAIN NODE set|set_atomically NAME=VALUE...\n");
  exit(1);
}

static const char *str(const char *s)
{
  return s != NULL ? s : "";
}

// userdata_value returns (malloc'd) the value of key in the endpoint's
// "key=value;key=value;" USER_DATA, or NULL, as rmw_cyclonedds'
// get_user_data_key does.
static char *userdata_value(const dds_qos_t *qos, const char *key)
{
  void *ud = NULL;
  size_t n = 0;
  char *value = NULL;
  if (qos == NULL || !dds_qget_userdata(qos, &ud, &n) || ud == NULL)
    return NULL;
  const char *p = ud, *end = p + n;
  size_t klen = strlen(key);
  while (p < end && value == NULL) {
    const char *semi = memchr(p, ';', (size_t)(end - p));
    const char *item_end = semi != NULL ? semi : end;
    const char *eq = memchr(p, '=', (size_t)(item_end - p));
    if (eq != NULL && (size_t)(eq - p) == klen && memcmp(p, key, klen) == 0) {
      size_t vlen = (size_t)(item_end - eq - 1);
      value = malloc(vlen + 1);
      memcpy(value, eq + 1, vlen);
      value[vlen] = '\0';
    }
    p = item_end + 1;
  }
  dds_free(ud);
  return value;
}

static void free_endpoint(dds_builtintopic_endpoint_t *e)
{
  dds_delete_qos(e->qos);
  dds_free(e->topic_name);
  dds_free(e->type_name);
  dds_free(e);
}

// service_available is rmw_cyclonedds' check_for_service_reader_writer.
static bool service_available(dds_entity_t wr, dds_entity_t rd)
{
  dds_instance_handle_t rds[MAXMATCH], wrs[MAXMATCH];
  dds_return_t nrd = dds_get_matched_subscriptions(wr, rds, MAXMATCH);
  if (nrd < 0) die("get matched subscriptions", nrd);
  dds_return_t nwr = dds_get_matched_publications(rd, wrs, MAXMATCH);
  if (nwr < 0) die("get matched publications", nwr);
  if (nrd > MAXMATCH) nrd = MAXMATCH;
  if (nwr > MAXMATCH) nwr = MAXMATCH;

  char *needles[MAXMATCH];
  int nneedles = 0;
  for (dds_return_t i = 0; i < nrd; i++) {
    dds_builtintopic_endpoint_t *e = dds_get_matched_subscription_data(wr, rds[i]);
    if (e == NULL)
      continue;
    char *id = userdata_value(e->qos, "serviceid");
    if (id != NULL)
      needles[nneedles++] = id;
    free_endpoint(e);
  }
  if (nneedles == 0)
    return nrd > 0 && nwr > 0; // no serviceid: matches alone will do
  bool ok = false;
  for (dds_return_t i = 0; i < nwr && !ok; i++) {
    dds_builtintopic_endpoint_t *e = dds_get_matched_publication_data(rd, wrs[i]);
    if (e == NULL)
      continue;
    char *id = userdata_value(e->qos, "serviceid");
    for (int k = 0; id != NULL && k < nneedles && !ok; k++)
      ok = strcmp(id, needles[k]) == 0;
    free(id);
    free_endpoint(e);
  }
  for (int k = 0; k < nneedles; k++)
    free(needles[k]);
  return ok;
}

static dds_qos_t *client_qos(const char *client_id)
{
  dds_qos_t *q = dds_create_qos();
  dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
  dds_qset_durability(q, DDS_DURABILITY_VOLATILE);
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 1000);
  dds_qset_userdata(q, client_id, strlen(client_id));
  return q;
}

// parameters turns NAME=VALUE arguments (edited in place) into STRING
// parameters.
static dds_sequence_rcl_interfaces_msg_dds__Parameter_ parameters(int n, char **args)
{
  rcl_interfaces_msg_dds__Parameter_ *p = calloc(n > 0 ? (size_t)n : 1, sizeof *p);
  for (int i = 0; i < n; i++) {
    char *eq = strchr(args[i], '=');
    if (eq == NULL || eq == args[i])
      usage();
    *eq = '\0';
    p[i].name = args[i];
    const char *v = eq + 1;
    // rcl_interfaces/msg/ParameterType: 1 bool, 2 integer, 3 double, 4 string.
    if (strncmp(v, "bool:", 5) == 0) {
      p[i].value.type = 1;
      p[i].value.bool_value = strcmp(v + 5, "true") == 0;
    } else if (strncmp(v, "int:", 4) == 0) {
      p[i].value.type = 2;
      p[i].value.integer_value = strtoll(v + 4, NULL, 10);
    } else if (strncmp(v, "double:", 7) == 0) {
      p[i].value.type = 3;
      p[i].value.double_value = strtod(v + 7, NULL);
    } else {
      p[i].value.type = 4;
      p[i].value.string_value = eq + 1;
    }
  }
  return (dds_sequence_rcl_interfaces_msg_dds__Parameter_){
    ._maximum = (uint32_t)n, ._length = (uint32_t)n, ._buffer = p, ._release = false};
}

static void print_reply(enum kind k, const void *sample)
{
  if (k == LIST) {
    const rcl_interfaces_srv_dds__ListParameters_Response_ *r = sample;
    for (uint32_t i = 0; i < r->result.names._length; i++)
      printf("name\t%s\n", str(r->result.names._buffer[i]));
    for (uint32_t i = 0; i < r->result.prefixes._length; i++)
      printf("prefix\t%s\n", str(r->result.prefixes._buffer[i]));
  } else if (k == GET) {
    const rcl_interfaces_srv_dds__GetParameters_Response_ *r = sample;
    for (uint32_t i = 0; i < r->values._length; i++) {
      const rcl_interfaces_msg_dds__ParameterValue_ *v = &r->values._buffer[i];
      printf("value\t%u\t%d\t%" PRId64 "\t%.17g\t%s\t%" PRIu32 "\n", v->type, v->bool_value ? 1 : 0,
             v->integer_value, v->double_value, str(v->string_value), v->string_array_value._length);
    }
  } else if (k == TYPES) {
    const rcl_interfaces_srv_dds__GetParameterTypes_Response_ *r = sample;
    for (uint32_t i = 0; i < r->types._length; i++)
      printf("type\t%u\n", r->types._buffer[i]);
  } else if (k == DESCRIBE) {
    const rcl_interfaces_srv_dds__DescribeParameters_Response_ *r = sample;
    for (uint32_t i = 0; i < r->descriptors._length; i++) {
      const rcl_interfaces_msg_dds__ParameterDescriptor_ *d = &r->descriptors._buffer[i];
      printf("descriptor\t%s\t%u\t%d\t%d\t%s\t%s\t%" PRIu32 "\t%" PRIu32 "\n", str(d->name), d->type,
             d->read_only ? 1 : 0, d->dynamic_typing ? 1 : 0, str(d->description), str(d->additional_constraints),
             d->floating_point_range._length, d->integer_range._length);
      // A range is printed only where there is one: older outputs stay.
      for (uint32_t j = 0; j < d->floating_point_range._length; j++) {
        const rcl_interfaces_msg_dds__FloatingPointRange_ *fr = &d->floating_point_range._buffer[j];
        printf("range\t%.17g\t%.17g\t%.17g\n", fr->from_value, fr->to_value, fr->step);
      }
    }
  } else if (k == SET) {
    const rcl_interfaces_srv_dds__SetParameters_Response_ *r = sample;
    for (uint32_t i = 0; i < r->results._length; i++)
      printf("result\t%d\t%s\n", r->results._buffer[i].successful ? 1 : 0, str(r->results._buffer[i].reason));
  } else {
    const rcl_interfaces_srv_dds__SetParametersAtomically_Response_ *r = sample;
    printf("result\t%d\t%s\n", r->result.successful ? 1 : 0, str(r->result.reason));
  }
}

int main(int argc, char **argv)
{
  if (argc < 4 || argv[2][0] != '/')
    usage();
  int k = -1;
  for (int i = 0; i < (int)(sizeof services / sizeof services[0]); i++)
    if (!strcmp(argv[3], services[i].cmd))
      k = i;
  if (k < 0 || (k == LIST && argc < 5))
    usage();
  const struct service *svc = &services[k];
  char **args = argv + 4;
  int nargs = argc - 4;

  // The request, filled in before any DDS call so usage errors come first.
  union {
    rcl_interfaces_srv_dds__ListParameters_Request_ list;
    rcl_interfaces_srv_dds__GetParameters_Request_ get;
    rcl_interfaces_srv_dds__GetParameterTypes_Request_ types;
    rcl_interfaces_srv_dds__DescribeParameters_Request_ describe;
    rcl_interfaces_srv_dds__SetParameters_Request_ set;
    rcl_interfaces_srv_dds__SetParametersAtomically_Request_ set_atomically;
  } rq;
  memset(&rq, 0, sizeof rq);
  const char *repeat_env = getenv("PARAMCLIENT_REPEAT");
  long repeat = repeat_env != NULL ? strtol(repeat_env, NULL, 10) : 1;
  if (repeat < 1 || repeat > 1000000)
    usage();
  char **repeated = args;
  if (repeat > 1) {
    repeated = malloc(sizeof(char *) * (size_t)nargs * (size_t)repeat);
    if (repeated == NULL) die("malloc", DDS_RETCODE_OUT_OF_RESOURCES);
    for (long r = 0; r < repeat; r++)
      memcpy(repeated + r * nargs, args, sizeof(char *) * (size_t)nargs);
  }
  uint32_t nnames = (uint32_t)(nargs * repeat);
  dds_sequence_string names = {
    ._maximum = nnames, ._length = nnames, ._buffer = repeated, ._release = false};
  switch ((enum kind)k) {
  case LIST: {
    char *end;
    if (args[0][0] < '0' || args[0][0] > '9')
      usage();
    rq.list.depth = strtoull(args[0], &end, 10);
    if (*end != '\0')
      usage();
    rq.list.prefixes = (dds_sequence_string){
      ._maximum = (uint32_t)nargs - 1, ._length = (uint32_t)nargs - 1, ._buffer = args + 1, ._release = false};
    break;
  }
  case GET: rq.get.names = names; break;
  case TYPES: rq.types.names = names; break;
  case DESCRIBE: rq.describe.names = names; break;
  case SET: rq.set.parameters = parameters(nargs, args); break;
  case SET_ATOMICALLY: rq.set_atomically.parameters = parameters(nargs, args); break;
  }

  char rq_topic[512], rr_topic[512];
  if ((size_t)snprintf(rq_topic, sizeof rq_topic, "rq%s/%sRequest", argv[2], svc->suffix) >= sizeof rq_topic ||
      (size_t)snprintf(rr_topic, sizeof rr_topic, "rr%s/%sReply", argv[2], svc->suffix) >= sizeof rr_topic)
    usage();

  // create_cdds_client: request writer and reply reader.
  dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
  if (pp < 0) die("create participant", pp);
  dds_entity_t rq_tp = dds_create_topic(pp, svc->request, rq_topic, NULL, NULL);
  if (rq_tp < 0) die("create request topic", rq_tp);
  dds_entity_t rr_tp = dds_create_topic(pp, svc->reply, rr_topic, NULL, NULL);
  if (rr_tp < 0) die("create reply topic", rr_tp);
  const char *deaf = getenv("PARAMCLIENT_DEAF");
  bool is_deaf = deaf != NULL && !strcmp(deaf, "1");
  bool no_reply_ok = is_deaf || repeat > 1;
  dds_qos_t *q = client_qos(is_deaf ? "clientid=9.9.9.9;" : CLIENT_ID);
  dds_entity_t rd = dds_create_reader(pp, rr_tp, q, NULL);
  if (rd < 0) die("create reader", rd);
  dds_delete_qos(q);
  q = client_qos(CLIENT_ID);
  dds_qset_writer_data_lifecycle(q, false);
  dds_data_representation_id_t xcdr1 = DDS_DATA_REPRESENTATION_XCDR1;
  dds_qset_data_representation(q, 1, &xcdr1);
  dds_entity_t wr = dds_create_writer(pp, rq_tp, q, NULL);
  dds_delete_qos(q);
  if (wr < 0) die("create writer", wr);

  // rmw_service_server_is_available, polled as rclpy's wait_for_service.
  dds_time_t deadline = dds_time() + WAIT;
  while (!service_available(wr, rd)) {
    if (dds_time() > deadline) {
      fprintf(stderr, "paramclient: service not available\n");
      exit(2);
    }
    dds_sleepfor(DDS_MSECS(10));
  }
  printf("available\n");
  fflush(stdout);

  // rmw_send_request: header = (request writer's instance handle, 1).
  dds_instance_handle_t ih;
  dds_return_t rc = dds_get_instance_handle(wr, &ih);
  if (rc < 0) die("get instance handle", rc);
  struct header h = {.client_guid = ih, .sequence_number = 1};
  memcpy(&rq, &h, sizeof h); // every request struct starts with the header
  rc = dds_write(wr, &rq);
  if (rc < 0) die("write request", rc);

  const char *raw = getenv("PARAMCLIENT_RAW");
  if (raw != NULL && !strcmp(raw, "1")) {
    deadline = dds_time() + WAIT;
    for (;;) {
      struct ddsi_serdata *sd = NULL;
      dds_sample_info_t si;
      dds_return_t n = dds_takecdr(rd, &sd, 1, &si, 0);
      if (n < 0) die("takecdr reply", n);
      if (n == 1 && si.valid_data) {
        uint32_t size = ddsi_serdata_size(sd);
        unsigned char *bytes = malloc(size == 0 ? 1 : size);
        if (bytes == NULL) die("malloc", DDS_RETCODE_OUT_OF_RESOURCES);
        ddsi_serdata_to_ser(sd, 0, size, bytes);
        printf("guid\t%016" PRIx64 "\nraw\t", (uint64_t)ih);
        for (uint32_t i = 0; i < size; i++)
          printf("%02x", bytes[i]);
        printf("\ndone\n");
        fflush(stdout);
        free(bytes);
        ddsi_serdata_unref(sd);
        dds_delete(pp);
        return 0;
      }
      if (n == 1)
        ddsi_serdata_unref(sd);
      if (dds_time() >= deadline) {
        fprintf(stderr, "paramclient: no reply\n");
        exit(3);
      }
      dds_sleepfor(DDS_MSECS(5));
    }
  }

  // rmw_take_response: take replies, dropping those for other requests.
  dds_entity_t ws = dds_create_waitset(pp);
  if (ws < 0) die("create waitset", ws);
  dds_entity_t cond = dds_create_readcondition(rd, DDS_ANY_STATE);
  if (cond < 0) die("create readcondition", cond);
  rc = dds_waitset_attach(ws, cond, 0);
  if (rc < 0) die("attach readcondition", rc);
  deadline = dds_time() + (no_reply_ok ? DDS_SECS(2) : WAIT);
  for (bool got = false; !got;) {
    void *buf[1] = {NULL};
    dds_sample_info_t si;
    dds_return_t n = dds_take(rd, buf, &si, 1, 1);
    if (n < 0) die("take reply", n);
    if (n == 0) {
      if (dds_time() >= deadline) {
        if (no_reply_ok) {
          printf("no reply\ndone\n");
          fflush(stdout);
          dds_delete(pp);
          return 0;
        }
        fprintf(stderr, "paramclient: no reply\n");
        exit(3);
      }
      dds_waitset_wait_until(ws, NULL, 0, deadline);
      continue;
    }
    if (si.valid_data) {
      struct header rh;
      memcpy(&rh, buf[0], sizeof rh);
      if (rh.client_guid == ih && rh.sequence_number == 1) {
        print_reply((enum kind)k, buf[0]);
        got = true;
      } else {
        printf("ignored reply for another client\n");
      }
    }
    dds_return_loan(rd, buf, n);
  }
  printf("done\n");
  fflush(stdout);
  if (k == SET || k == SET_ATOMICALLY)
    free(k == SET ? rq.set.parameters._buffer : rq.set_atomically.parameters._buffer);
  dds_delete(pp);
  return 0;
}
