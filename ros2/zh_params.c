//go:build ros2 && cgo

// zh_params: the C side of the parameter services (rcl_interfaces/srv),
// declared in zh_dds.h. Requests are taken with a loan and copied out as
// plain strings and values; replies are built on the heap from the
// caller's plain records, written (dds_write serializes them before it
// returns) and freed. No pointer into the caller's memory outlives a call.

#include <stdlib.h>
#include <string.h>

#include "zh_dds.h"
#include "rcl_interfaces.h"

static const char *str_or_empty(const char *s)
{
  return s == NULL ? "" : s;
}

const dds_topic_descriptor_t *zh_service_descriptor(int type)
{
  switch (type) {
  case ZH_REQUEST + ZH_SRV_DESCRIBE:
    return &rcl_interfaces_srv_dds__DescribeParameters_Request__desc;
  case ZH_REPLY + ZH_SRV_DESCRIBE:
    return &rcl_interfaces_srv_dds__DescribeParameters_Response__desc;
  case ZH_REQUEST + ZH_SRV_GET_TYPES:
    return &rcl_interfaces_srv_dds__GetParameterTypes_Request__desc;
  case ZH_REPLY + ZH_SRV_GET_TYPES:
    return &rcl_interfaces_srv_dds__GetParameterTypes_Response__desc;
  case ZH_REQUEST + ZH_SRV_GET:
    return &rcl_interfaces_srv_dds__GetParameters_Request__desc;
  case ZH_REPLY + ZH_SRV_GET:
    return &rcl_interfaces_srv_dds__GetParameters_Response__desc;
  case ZH_REQUEST + ZH_SRV_LIST:
    return &rcl_interfaces_srv_dds__ListParameters_Request__desc;
  case ZH_REPLY + ZH_SRV_LIST:
    return &rcl_interfaces_srv_dds__ListParameters_Response__desc;
  case ZH_REQUEST + ZH_SRV_SET:
    return &rcl_interfaces_srv_dds__SetParameters_Request__desc;
  case ZH_REPLY + ZH_SRV_SET:
    return &rcl_interfaces_srv_dds__SetParameters_Response__desc;
  case ZH_REQUEST + ZH_SRV_SET_ATOMICALLY:
    return &rcl_interfaces_srv_dds__SetParametersAtomically_Request__desc;
  case ZH_REPLY + ZH_SRV_SET_ATOMICALLY:
    return &rcl_interfaces_srv_dds__SetParametersAtomically_Response__desc;
  }
  return NULL;
}

// The request types share their header and, but for list and the sets, a
// names sequence; these views pick the parts by service.
static const dds_sequence_string *request_names(int srv, const void *s)
{
  switch (srv) {
  case ZH_SRV_DESCRIBE:
    return &((const rcl_interfaces_srv_dds__DescribeParameters_Request_ *)s)->names;
  case ZH_SRV_GET_TYPES:
    return &((const rcl_interfaces_srv_dds__GetParameterTypes_Request_ *)s)->names;
  case ZH_SRV_GET:
    return &((const rcl_interfaces_srv_dds__GetParameters_Request_ *)s)->names;
  case ZH_SRV_LIST:
    return &((const rcl_interfaces_srv_dds__ListParameters_Request_ *)s)->prefixes;
  }
  return NULL;
}

static const dds_sequence_rcl_interfaces_msg_dds__Parameter_ *request_params(int srv, const void *s)
{
  if (srv == ZH_SRV_SET)
    return &((const rcl_interfaces_srv_dds__SetParameters_Request_ *)s)->parameters;
  if (srv == ZH_SRV_SET_ATOMICALLY)
    return &((const rcl_interfaces_srv_dds__SetParametersAtomically_Request_ *)s)->parameters;
  return NULL;
}

static uint32_t seq_len(uint32_t length, const void *buffer)
{
  return buffer == NULL ? 0 : length;
}

int32_t zh_take_request(dds_entity_t reader, int srv, zh_request *out)
{
  if (srv < ZH_SRV_DESCRIBE || srv > ZH_SRV_SET_ATOMICALLY)
    return DDS_RETCODE_BAD_PARAMETER;
  for (;;) {
    void *buf[1] = {NULL};
    dds_sample_info_t si;
    dds_return_t n = dds_take(reader, buf, &si, 1, 1);
    if (n <= 0)
      return n;
    if (!si.valid_data) {
      (void)dds_return_loan(reader, buf, n);
      continue;
    }
    // Every request type starts with the header (same layout).
    const rcl_interfaces_srv_dds__GetParameters_Request_ *h = buf[0];
    memset(out, 0, sizeof(*out));
    out->loan = buf[0];
    out->client_guid = h->client_guid;
    out->sequence_number = h->sequence_number;
    out->writer = si.publication_handle;
    uint64_t bytes = 0;
    const dds_sequence_string *names = request_names(srv, buf[0]);
    if (names != NULL) {
      out->nnames = seq_len(names->_length, names->_buffer);
      for (uint32_t i = 0; i < out->nnames; i++)
        bytes += strlen(str_or_empty(names->_buffer[i])) + 1;
    } else {
      const dds_sequence_rcl_interfaces_msg_dds__Parameter_ *ps = request_params(srv, buf[0]);
      out->nnames = seq_len(ps->_length, ps->_buffer);
      for (uint32_t i = 0; i < out->nnames; i++)
        bytes += strlen(str_or_empty(ps->_buffer[i].name)) + 1 +
                 strlen(str_or_empty(ps->_buffer[i].value.string_value)) + 1;
    }
    if (srv == ZH_SRV_LIST)
      out->depth = ((const rcl_interfaces_srv_dds__ListParameters_Request_ *)buf[0])->depth;
    if (bytes > UINT32_MAX) {
      (void)dds_return_loan(reader, buf, n);
      return DDS_RETCODE_OUT_OF_RESOURCES;
    }
    out->bytes = (uint32_t)bytes;
    return 1;
  }
}

static char *put(char *dst, const char *s)
{
  size_t n = strlen(str_or_empty(s));
  memcpy(dst, str_or_empty(s), n);
  dst[n] = 0;
  return dst + n + 1;
}

dds_return_t zh_request_strings(int srv, const zh_request *req, char *buf, uint32_t cap, zh_param_value *values)
{
  if (cap < req->bytes)
    return DDS_RETCODE_BAD_PARAMETER;
  char *p = buf;
  const dds_sequence_string *names = request_names(srv, req->loan);
  if (names != NULL) {
    for (uint32_t i = 0; i < req->nnames; i++)
      p = put(p, names->_buffer[i]);
    return DDS_RETCODE_OK;
  }
  const dds_sequence_rcl_interfaces_msg_dds__Parameter_ *ps = request_params(srv, req->loan);
  if (ps == NULL)
    return DDS_RETCODE_BAD_PARAMETER;
  for (uint32_t i = 0; i < req->nnames; i++) {
    const rcl_interfaces_msg_dds__Parameter_ *q = &ps->_buffer[i];
    p = put(p, q->name);
    p = put(p, q->value.string_value);
    values[i].type = q->value.type;
    values[i].bool_value = q->value.bool_value;
    values[i].integer_value = q->value.integer_value;
    values[i].double_value = q->value.double_value;
  }
  return DDS_RETCODE_OK;
}

// A reply's sequences point into one heap block per array, freed after the
// write; strings point into the caller's buffer (dds_write only reads).
#define STR(off) ((char *)(strings + (off)))

static void set_value(rcl_interfaces_msg_dds__ParameterValue_ *v, const char *strings, const zh_param_rec *r)
{
  memset(v, 0, sizeof(*v));
  v->type = r->type;
  v->bool_value = r->bool_value != 0;
  v->integer_value = r->integer_value;
  v->double_value = r->double_value;
  v->string_value = STR(r->string_value);
}

static void set_result(rcl_interfaces_msg_dds__SetParametersResult_ *res, const char *strings, const zh_param_rec *r)
{
  res->successful = r->successful != 0;
  res->reason = STR(r->reason);
}

dds_return_t zh_write_reply(dds_entity_t writer, int srv, uint64_t client_guid, int64_t sequence_number,
                            const char *strings, const zh_param_rec *recs, uint32_t n,
                            const uint32_t *prefixes, uint32_t nprefixes)
{
  // calloc(0) may return NULL: allocate at least one element.
  size_t count = n == 0 ? 1 : n;
  dds_return_t rc = DDS_RETCODE_BAD_PARAMETER;
  switch (srv) {
  case ZH_SRV_DESCRIBE: {
    rcl_interfaces_srv_dds__DescribeParameters_Response_ r = {client_guid, sequence_number, {0}};
    rcl_interfaces_msg_dds__ParameterDescriptor_ *d = calloc(count, sizeof(*d));
    rcl_interfaces_msg_dds__FloatingPointRange_ *fr = calloc(count, sizeof(*fr));
    if (d == NULL || fr == NULL) {
      free(d);
      free(fr);
      return DDS_RETCODE_OUT_OF_RESOURCES;
    }
    for (uint32_t i = 0; i < n; i++) {
      d[i].name = STR(recs[i].name);
      d[i].type = recs[i].type;
      d[i].description = STR(recs[i].description);
      d[i].additional_constraints = STR(recs[i].constraints);
      d[i].read_only = recs[i].read_only != 0;
      if (recs[i].has_range) {
        fr[i].from_value = recs[i].range_from;
        fr[i].to_value = recs[i].range_to;
        fr[i].step = recs[i].range_step;
        d[i].floating_point_range._length = d[i].floating_point_range._maximum = 1;
        d[i].floating_point_range._buffer = &fr[i];
      }
    }
    r.descriptors._length = r.descriptors._maximum = n;
    r.descriptors._buffer = d;
    rc = dds_write(writer, &r);
    free(d);
    free(fr);
    break;
  }
  case ZH_SRV_GET_TYPES: {
    rcl_interfaces_srv_dds__GetParameterTypes_Response_ r = {client_guid, sequence_number, {0}};
    uint8_t *t = calloc(count, 1);
    if (t == NULL)
      return DDS_RETCODE_OUT_OF_RESOURCES;
    for (uint32_t i = 0; i < n; i++)
      t[i] = recs[i].type;
    r.types._length = r.types._maximum = n;
    r.types._buffer = t;
    rc = dds_write(writer, &r);
    free(t);
    break;
  }
  case ZH_SRV_GET: {
    rcl_interfaces_srv_dds__GetParameters_Response_ r = {client_guid, sequence_number, {0}};
    rcl_interfaces_msg_dds__ParameterValue_ *v = calloc(count, sizeof(*v));
    if (v == NULL)
      return DDS_RETCODE_OUT_OF_RESOURCES;
    for (uint32_t i = 0; i < n; i++)
      set_value(&v[i], strings, &recs[i]);
    r.values._length = r.values._maximum = n;
    r.values._buffer = v;
    rc = dds_write(writer, &r);
    free(v);
    break;
  }
  case ZH_SRV_LIST: {
    rcl_interfaces_srv_dds__ListParameters_Response_ r = {client_guid, sequence_number, {{0}, {0}}};
    char **names = calloc(count, sizeof(char *));
    char **pre = calloc(nprefixes == 0 ? 1 : nprefixes, sizeof(char *));
    if (names == NULL || pre == NULL) {
      free(names);
      free(pre);
      return DDS_RETCODE_OUT_OF_RESOURCES;
    }
    for (uint32_t i = 0; i < n; i++)
      names[i] = STR(recs[i].name);
    for (uint32_t i = 0; i < nprefixes; i++)
      pre[i] = STR(prefixes[i]);
    r.result.names._length = r.result.names._maximum = n;
    r.result.names._buffer = names;
    r.result.prefixes._length = r.result.prefixes._maximum = nprefixes;
    r.result.prefixes._buffer = pre;
    rc = dds_write(writer, &r);
    free(names);
    free(pre);
    break;
  }
  case ZH_SRV_SET: {
    rcl_interfaces_srv_dds__SetParameters_Response_ r = {client_guid, sequence_number, {0}};
    rcl_interfaces_msg_dds__SetParametersResult_ *res = calloc(count, sizeof(*res));
    if (res == NULL)
      return DDS_RETCODE_OUT_OF_RESOURCES;
    for (uint32_t i = 0; i < n; i++)
      set_result(&res[i], strings, &recs[i]);
    r.results._length = r.results._maximum = n;
    r.results._buffer = res;
    rc = dds_write(writer, &r);
    free(res);
    break;
  }
  case ZH_SRV_SET_ATOMICALLY: {
    if (n != 1)
      return DDS_RETCODE_BAD_PARAMETER;
    rcl_interfaces_srv_dds__SetParametersAtomically_Response_ r = {client_guid, sequence_number, {0}};
    set_result(&r.result, strings, &recs[0]);
    rc = dds_write(writer, &r);
    break;
  }
  }
  return rc;
}

dds_return_t zh_write_parameter_event(dds_entity_t writer, int32_t sec, uint32_t nanosec, const char *node,
                                      const char *strings, const zh_param_rec *recs, uint32_t nnew,
                                      uint32_t nchanged)
{
  uint32_t n = nnew + nchanged;
  if (n < nnew)
    return DDS_RETCODE_BAD_PARAMETER;
  rcl_interfaces_msg_dds__Parameter_ *p = calloc(n == 0 ? 1 : n, sizeof(*p));
  if (p == NULL)
    return DDS_RETCODE_OUT_OF_RESOURCES;
  for (uint32_t i = 0; i < n; i++) {
    p[i].name = STR(recs[i].name);
    set_value(&p[i].value, strings, &recs[i]);
  }
  rcl_interfaces_msg_dds__ParameterEvent_ m;
  memset(&m, 0, sizeof m);
  m.stamp.sec = sec;
  m.stamp.nanosec = nanosec;
  m.node = (char *)node; // dds_write only reads it
  m.new_parameters._length = m.new_parameters._maximum = nnew;
  m.new_parameters._buffer = nnew > 0 ? p : NULL;
  m.changed_parameters._length = m.changed_parameters._maximum = nchanged;
  m.changed_parameters._buffer = nchanged > 0 ? p + nnew : NULL;
  dds_return_t rc = dds_write(writer, &m);
  free(p);
  return rc;
}

// userdata_value finds key's value in USER_DATA "k=v;k=v;" and copies it,
// NUL-terminated, into out (cut to size). 1 if found.
static int userdata_value(const dds_qos_t *qos, const char *key, char *out, size_t size)
{
  void *ud = NULL;
  size_t n = 0;
  if (qos == NULL || !dds_qget_userdata(qos, &ud, &n) || ud == NULL)
    return 0;
  int found = 0;
  size_t klen = strlen(key);
  const char *s = ud, *end = s + n;
  while (s < end && !found) {
    const char *semi = memchr(s, ';', (size_t)(end - s));
    const char *stop = semi == NULL ? end : semi;
    if ((size_t)(stop - s) > klen && memcmp(s, key, klen) == 0 && s[klen] == '=') {
      size_t vlen = (size_t)(stop - s) - klen - 1;
      if (vlen >= size)
        vlen = size - 1;
      memcpy(out, s + klen + 1, vlen);
      out[vlen] = 0;
      found = 1;
    }
    s = stop + 1;
  }
  dds_free(ud);
  return found;
}

static void free_endpoint(dds_builtintopic_endpoint_t *e)
{
  if (e == NULL)
    return;
  dds_delete_qos(e->qos);
  dds_free(e->topic_name);
  dds_free(e->type_name);
  dds_free(e);
}

#define ZH_MAX_MATCHED 256

int32_t zh_client_reply_matched(dds_entity_t request_reader, dds_entity_t reply_writer, uint64_t request_writer)
{
  dds_builtintopic_endpoint_t *wr = dds_get_matched_publication_data(request_reader, request_writer);
  if (wr == NULL)
    return 2;
  char clientid[128];
  int has_id = userdata_value(wr->qos, "clientid", clientid, sizeof clientid);
  free_endpoint(wr);
  if (!has_id)
    return 1;
  // Most graphs have a few matched readers: look on the stack first; on
  // one with more (dds_get_matched_subscriptions returns how many there
  // are), look at all of them, or the client would be judged deaf.
  dds_instance_handle_t stack[ZH_MAX_MATCHED], *rds = stack;
  dds_return_t n = dds_get_matched_subscriptions(reply_writer, rds, ZH_MAX_MATCHED);
  if (n < 0)
    return n;
  if (n > ZH_MAX_MATCHED) {
    size_t want = (size_t)n;
    rds = malloc(want * sizeof *rds);
    if (rds == NULL)
      return DDS_RETCODE_OUT_OF_RESOURCES;
    n = dds_get_matched_subscriptions(reply_writer, rds, want);
    if (n < 0) {
      free(rds);
      return n;
    }
    if ((size_t)n > want)
      n = (dds_return_t)want; // more matched meanwhile: these are enough for now
  }
  int32_t matched = 0;
  for (dds_return_t i = 0; i < n && !matched; i++) {
    dds_builtintopic_endpoint_t *rd = dds_get_matched_subscription_data(reply_writer, rds[i]);
    char id[128];
    matched = rd != NULL && userdata_value(rd->qos, "clientid", id, sizeof id) && strcmp(id, clientid) == 0;
    free_endpoint(rd);
  }
  if (rds != stack)
    free(rds);
  return matched;
}

dds_return_t zh_waitset_attach_reader(dds_entity_t waitset, dds_entity_t reader)
{
  // The read condition is the reader's child and goes with it.
  dds_entity_t cond = dds_create_readcondition(reader, DDS_ANY_STATE);
  if (cond < 0)
    return cond;
  dds_return_t rc = dds_waitset_attach(waitset, cond, (dds_attach_t)reader);
  if (rc < 0)
    dds_delete(cond);
  return rc;
}
