//go:build ros2 && cgo

package ros2

// This is the package's only cgo file: every call into C is here, through
// the plain-typed functions of zh_dds.h. Invariants the rest of the
// package relies on:
//
//   - entity is a Cyclone handle (int32), not a pointer. Using a deleted
//     handle yields a DDS error code, never a memory access, so a race
//     between Close and a call can at worst return an error.
//   - No Go pointer is kept by C: the calls that take Go memory (waitWakeups
//     xs, entityGUID, writeDiscovery's GUIDs, writeDiagnostics' buffers)
//     use it only for the duration of the call, and that memory holds no
//     pointers. Memory that C fills
//     with C pointers (the sample views) is allocated in C (cView), so
//     the Go heap never holds pointers written by C.
//   - Slices made from C memory (cBytes and cFloats in takeImage,
//     takeCloud, takeScan) point into a sample Cyclone has loaned to a
//     reader; they are valid until returnLoan for that loan, and
//     Subscription clears them before returning the loan.

/*
#cgo pkg-config: CycloneDDS
#include <stdlib.h>
#include "zh_dds.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/zerohop/zerohop/handles"
)

// entity is a Cyclone DDS entity handle; negative values are return codes.
type entity int32

// retcode is a negative Cyclone DDS return code.
type retcode int32

const (
	rcPreconditionNotMet = retcode(C.DDS_RETCODE_PRECONDITION_NOT_MET)
	rcAlreadyDeleted     = retcode(C.DDS_RETCODE_ALREADY_DELETED)
	rcTimeout            = retcode(C.DDS_RETCODE_TIMEOUT)
)

func (rc retcode) String() string {
	return C.GoString(C.dds_strretcode(C.dds_return_t(rc)))
}

// ddsError is a failed DDS call: what was attempted and Cyclone's code.
type ddsError struct {
	op string // "create writer on rt/cmd_vel", ...
	rc retcode
}

func (e *ddsError) Error() string {
	return fmt.Sprintf("ros2: %s: %s (DDS return code %d)", e.op, e.rc, int32(e.rc))
}

func cType(t msgType) C.int {
	switch t {
	case typeTwist:
		return C.ZH_TWIST
	case typeTwistStamped:
		return C.ZH_TWIST_STAMPED
	case typeImage:
		return C.ZH_IMAGE
	case typePointCloud2:
		return C.ZH_POINTCLOUD2
	case typeSlotHandle:
		return C.ZH_SLOT_HANDLE
	case typeDiagnostics:
		return C.ZH_DIAGNOSTICS
	case typeLog:
		return C.ZH_LOG
	case typeParameterEvent:
		return C.ZH_PARAMETER_EVENT
	case typeTFMessage:
		return C.ZH_TF_MESSAGE
	case typeClock:
		return C.ZH_CLOCK
	case typeLaserScan:
		return C.ZH_LASER_SCAN
	}
	if t.isService() {
		return C.int(t) // ZH_REQUEST and ZH_REPLY have the same values
	}
	return 0
}

var (
	_ [C.ZH_REQUEST - typeRequest]byte
	_ [typeRequest - C.ZH_REQUEST]byte
	_ [C.ZH_REPLY - typeReply]byte
	_ [typeReply - C.ZH_REPLY]byte
	_ [C.ZH_SRV_SET_ATOMICALLY - srvSetAtomically]byte
	_ [srvSetAtomically - C.ZH_SRV_SET_ATOMICALLY]byte
	_ [C.ZH_SRV_DESCRIBE - srvDescribe]byte
	_ [srvDescribe - C.ZH_SRV_DESCRIBE]byte
)

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// createParticipant creates the domain with config and a participant in
// it with those QoS properties (name, value pairs).
func createParticipant(domain uint32, config, userData string, props [][2]string) (pp, dom entity, rc retcode) {
	cc, cu := C.CString(config), C.CString(userData)
	defer C.free(unsafe.Pointer(cc))
	defer C.free(unsafe.Pointer(cu))
	// The arrays of C strings live in C memory: Go memory passed to C
	// must not hold Go pointers, and these hold C ones.
	n := len(props)
	size := C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))
	names, values := (**C.char)(C.malloc(size)), (**C.char)(C.malloc(size))
	defer C.free(unsafe.Pointer(names))
	defer C.free(unsafe.Pointer(values))
	ns, vs := unsafe.Slice(names, max(n, 1)), unsafe.Slice(values, max(n, 1))
	for i, p := range props {
		ns[i], vs[i] = C.CString(p[0]), C.CString(p[1])
		defer C.free(unsafe.Pointer(ns[i]))
		defer C.free(unsafe.Pointer(vs[i]))
	}
	var d C.dds_entity_t
	p := C.zh_participant(C.uint32_t(domain), cc, cu, names, values, C.int(n), &d)
	if p < 0 {
		return 0, 0, retcode(p)
	}
	return entity(p), entity(d), 0
}

func deleteEntity(e entity) retcode {
	if rc := C.dds_delete(C.dds_entity_t(e)); rc < 0 {
		return retcode(rc)
	}
	return 0
}

func writerStatusMask() uint32 { return uint32(C.zh_writer_status_mask()) }
func readerStatusMask() uint32 { return uint32(C.zh_reader_status_mask()) }

// createEndpoint creates a topic and a writer or reader on it; q must be
// resolved. maxBlocking (≥ 0) is a RELIABLE writer's max_blocking_time.
// userData is the endpoint's USER_DATA.
func createEndpoint(pp entity, t msgType, ddsTopic, userData string, writer bool, q QoS, maxBlocking time.Duration, mask uint32) (entity, retcode) {
	ct, cu := C.CString(ddsTopic), C.CString(userData)
	defer C.free(unsafe.Pointer(ct))
	defer C.free(unsafe.Pointer(cu))
	e := C.zh_endpoint(C.dds_entity_t(pp), cType(t), ct, cBool(writer), cBool(q.Reliability == BestEffort), cBool(q.transientLocal),
		C.int32_t(q.Depth), C.int64_t(maxBlocking.Nanoseconds()), C.int64_t(q.lifespan.Nanoseconds()), cu, C.uint32_t(mask))
	if e < 0 {
		return 0, retcode(e)
	}
	return entity(e), 0
}

// waitForAcks waits until every matched RELIABLE reader has acknowledged
// all of writer w's samples, for at most timeout (rcTimeout then).
func waitForAcks(w entity, timeout time.Duration) retcode {
	if rc := C.dds_wait_for_acks(C.dds_entity_t(w), C.dds_duration_t(timeout.Nanoseconds())); rc < 0 {
		return retcode(rc)
	}
	return 0
}

func deleteEndpoint(e entity) retcode {
	if rc := C.zh_endpoint_delete(C.dds_entity_t(e)); rc < 0 {
		return retcode(rc)
	}
	return 0
}

// diagStatusRec is C's zh_diag_status laid out in Go, so that the
// diagnostics writer can fill a reused Go slice of them; the array sizes
// below fail to compile if the two layouts ever differ.
type diagStatusRec struct {
	level                     uint8
	name, message, hardwareID uint32 // offsets into the strings buffer
	firstValue, nvalues       uint32
}

var (
	_ [unsafe.Sizeof(C.zh_diag_status{}) - unsafe.Sizeof(diagStatusRec{})]byte
	_ [unsafe.Sizeof(diagStatusRec{}) - unsafe.Sizeof(C.zh_diag_status{})]byte
	_ [unsafe.Offsetof(C.zh_diag_status{}.nvalues) - unsafe.Offsetof(diagStatusRec{}.nvalues)]byte
	_ [unsafe.Offsetof(diagStatusRec{}.nvalues) - unsafe.Offsetof(C.zh_diag_status{}.nvalues)]byte
)

// writeDiagnostics writes one DiagnosticArray: strings holds every string
// NUL-terminated, statuses and values (key, value offset pairs) point into
// it. All three are Go memory without pointers, read during the call only.
func writeDiagnostics(w entity, sec int32, nanosec uint32, strings []byte, statuses []diagStatusRec, values []uint32) retcode {
	var st *C.zh_diag_status
	if len(statuses) > 0 {
		st = (*C.zh_diag_status)(unsafe.Pointer(&statuses[0]))
	}
	var vals *C.uint32_t
	if len(values) > 0 {
		vals = (*C.uint32_t)(unsafe.Pointer(&values[0]))
	}
	rc := C.zh_write_diagnostics(C.dds_entity_t(w), C.int32_t(sec), C.uint32_t(nanosec),
		(*C.char)(unsafe.Pointer(&strings[0])), st, C.uint32_t(len(statuses)), vals)
	if rc < 0 {
		return retcode(rc)
	}
	return 0
}

func writeTwist(w entity, linearX, angularZ float64) retcode {
	if rc := C.zh_write_twist(C.dds_entity_t(w), C.double(linearX), C.double(angularZ)); rc < 0 {
		return retcode(rc)
	}
	return 0
}

// cString is a NUL-terminated string in C memory, freed by free.
type cString struct{ p *C.char }

func newCString(s string) cString { return cString{C.CString(s)} }
func (s cString) free()           { C.free(unsafe.Pointer(s.p)) }

func writeTwistStamped(w entity, sec int32, nanosec uint32, frameID cString, linearX, angularZ float64) retcode {
	rc := C.zh_write_twist_stamped(C.dds_entity_t(w), C.int32_t(sec), C.uint32_t(nanosec), frameID.p,
		C.double(linearX), C.double(angularZ))
	if rc < 0 {
		return retcode(rc)
	}
	return 0
}

// slotHandleBuf is a zh_slot_handle in C memory, reused for every write.
type slotHandleBuf struct{ p *C.zh_slot_handle }

func newSlotHandleBuf() slotHandleBuf {
	return slotHandleBuf{(*C.zh_slot_handle)(C.calloc(1, C.size_t(unsafe.Sizeof(C.zh_slot_handle{}))))}
}
func (b slotHandleBuf) free() { C.free(unsafe.Pointer(b.p)) }

// writeSlotHandle fills b from h and writes it. The frame id is copied
// byte by byte; frame_id[16] stays NUL (calloc), so the C string ends.
func writeSlotHandle(w entity, b slotHandleBuf, h *handles.Handle) retcode {
	s := b.p
	s.sec, s.nanosec = C.int32_t(0), C.uint32_t(0)
	if h.CaptureNs != 0 {
		sec, ns := h.CaptureNs/1e9, h.CaptureNs%1e9
		if ns < 0 {
			sec, ns = sec-1, ns+1e9
		}
		if sec >= -1<<31 && sec < 1<<31 {
			s.sec, s.nanosec = C.int32_t(sec), C.uint32_t(ns)
		}
	}
	for i, c := range h.FrameID {
		s.frame_id[i] = C.char(c)
	}
	s.version = handles.Version
	s.kind = C.uint8_t(h.Kind)
	s.pool_id = C.uint32_t(h.PoolID)
	s.slot = C.uint32_t(h.Slot)
	s.generation = C.uint64_t(h.Generation)
	s.seq = C.uint64_t(h.Seq)
	s.publish_time_ns = C.int64_t(h.PublishNs)
	s.length = C.uint64_t(h.Length)
	s.checksum = C.uint64_t(h.Checksum)
	s.width = C.uint32_t(h.Image.Width)
	s.height = C.uint32_t(h.Image.Height)
	s.row_step = C.uint32_t(h.Image.RowStep)
	s.encoding = C.uint8_t(h.Image.Encoding)
	s.point_count = C.uint32_t(h.Points.Count)
	s.point_step = C.uint32_t(h.Points.Step)
	s.offset_x = C.uint16_t(h.Points.X)
	s.offset_y = C.uint16_t(h.Points.Y)
	s.offset_z = C.uint16_t(h.Points.Z)
	s.offset_intensity = C.uint16_t(h.Points.Intensity)
	s.datatype = C.uint8_t(h.Points.Datatype)
	s.point_flags = C.uint8_t(h.Points.Flags)
	if rc := C.zh_write_slot_handle(C.dds_entity_t(w), s); rc < 0 {
		return retcode(rc)
	}
	return 0
}

// endpointStatus is zh_status in Go types.
type endpointStatus struct {
	matched, matchedChange int32
	matchedTotal           uint32
	incompatibleTotal      uint32
	incompatibleChange     int32
	incompatiblePolicy     uint32
	lostTotal              uint32
	lostChange             int32
}

func takeStatus(e entity, writer bool) (endpointStatus, retcode) {
	var s C.zh_status
	if rc := C.zh_take_status(C.dds_entity_t(e), cBool(writer), &s); rc < 0 {
		return endpointStatus{}, retcode(rc)
	}
	return endpointStatus{
		matched: int32(s.matched_current), matchedChange: int32(s.matched_current_change),
		matchedTotal:      uint32(s.matched_total),
		incompatibleTotal: uint32(s.incompatible_total), incompatibleChange: int32(s.incompatible_change),
		incompatiblePolicy: uint32(s.incompatible_policy),
		lostTotal:          uint32(s.lost_total), lostChange: int32(s.lost_change),
	}, 0
}

func policyName(id uint32) string { return C.GoString(C.zh_policy_name(C.uint32_t(id))) }

func createWaitset(pp entity) (entity, retcode) {
	ws := C.zh_waitset(C.dds_entity_t(pp))
	if ws < 0 {
		return 0, retcode(ws)
	}
	return entity(ws), 0
}

func attach(ws, e entity) retcode {
	if rc := C.zh_waitset_attach(C.dds_entity_t(ws), C.dds_entity_t(e)); rc < 0 {
		return retcode(rc)
	}
	return 0
}

func detach(ws, e entity) retcode {
	if rc := C.dds_waitset_detach(C.dds_entity_t(ws), C.dds_entity_t(e)); rc < 0 {
		return retcode(rc)
	}
	return 0
}

// wakeup makes waitWakeups on ws return (Close's way to stop a goroutine).
func wakeup(ws entity) retcode {
	if rc := C.dds_waitset_set_trigger(C.dds_entity_t(ws), true); rc < 0 {
		return retcode(rc)
	}
	return 0
}

// waitWakeups blocks until something attached to ws triggers, storing
// the triggered entities in xs; n may exceed len(xs).
func waitWakeups(ws entity, xs []int32) (n int, rc retcode) {
	var p *C.int32_t
	if len(xs) > 0 {
		p = (*C.int32_t)(unsafe.Pointer(&xs[0]))
	}
	r := C.zh_waitset_wait(C.dds_entity_t(ws), p, C.int32_t(len(xs)))
	if r < 0 {
		return 0, retcode(r)
	}
	return int(r), 0
}

func createReaderWaitset(pp, rd entity) (entity, retcode) {
	ws := C.zh_reader_waitset(C.dds_entity_t(pp), C.dds_entity_t(rd))
	if ws < 0 {
		return 0, retcode(ws)
	}
	return entity(ws), 0
}

// cView is the C-allocated view struct a subscription's takes fill.
type cView struct{ p unsafe.Pointer }

func newCView(t msgType) cView {
	size := unsafe.Sizeof(C.zh_image{})
	switch t {
	case typePointCloud2:
		size = unsafe.Sizeof(C.zh_cloud{})
	case typeLaserScan:
		size = unsafe.Sizeof(C.zh_scan{})
	}
	return cView{C.calloc(1, C.size_t(size))}
}
func (v cView) free() { C.free(v.p) }

// cBytes views n bytes of C memory at p; nil for none.
func cBytes[T any](p *T, n uintptr) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), n)
}

// cFloats views n floats of C memory at p; nil for none.
func cFloats(p *C.float, n uintptr) []float32 {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), n)
}

// takeImage takes one loaned Image into v. It returns the loan to give
// back with returnLoan, and n = 1, or n = 0 when the reader is empty.
func takeImage(rd entity, cv cView, v *ImageView) (loan unsafe.Pointer, n int32, rc retcode) {
	c := (*C.zh_image)(cv.p)
	r := C.zh_take_image(C.dds_entity_t(rd), c)
	if r <= 0 {
		return nil, 0, retcode(r)
	}
	*v = ImageView{
		Sec: int32(c.sec), Nanosec: uint32(c.nanosec),
		FrameID: cBytes(c.frame_id, uintptr(c.frame_id_len)),
		Height:  uint32(c.height), Width: uint32(c.width),
		Encoding:    cBytes(c.encoding, uintptr(c.encoding_len)),
		IsBigEndian: uint8(c.is_bigendian), Step: uint32(c.step),
		Data: cBytes(c.data, uintptr(c.data_len)),
	}
	return c.loan, 1, 0
}

// takeCloud takes one loaned PointCloud2 into v, like takeImage.
// nfields is the cloud's true field count; only MaxPointFields are in v.
func takeCloud(rd entity, cv cView, v *PointCloud2View) (loan unsafe.Pointer, n int32, nfields int, rc retcode) {
	c := (*C.zh_cloud)(cv.p)
	r := C.zh_take_cloud(C.dds_entity_t(rd), c)
	if r <= 0 {
		return nil, 0, 0, retcode(r)
	}
	nf := int(c.nfields)
	k := min(nf, MaxPointFields, int(C.ZH_MAX_FIELDS))
	for i := 0; i < k; i++ {
		f := &c.fields[i]
		v.fields[i] = PointField{Name: cBytes(f.name, uintptr(f.name_len)), Offset: uint32(f.offset),
			Datatype: uint8(f.datatype), Count: uint32(f.count)}
	}
	v.Sec, v.Nanosec = int32(c.sec), uint32(c.nanosec)
	v.FrameID = cBytes(c.frame_id, uintptr(c.frame_id_len))
	v.Height, v.Width = uint32(c.height), uint32(c.width)
	v.Fields = v.fields[:k]
	v.IsBigEndian = c.is_bigendian != 0
	v.PointStep, v.RowStep = uint32(c.point_step), uint32(c.row_step)
	v.Data = cBytes(c.data, uintptr(c.data_len))
	v.IsDense = c.is_dense != 0
	return c.loan, 1, nf, 0
}

// takeScan takes one loaned LaserScan into v, like takeImage.
func takeScan(rd entity, cv cView, v *LaserScanView) (loan unsafe.Pointer, n int32, rc retcode) {
	c := (*C.zh_scan)(cv.p)
	r := C.zh_take_scan(C.dds_entity_t(rd), c)
	if r <= 0 {
		return nil, 0, retcode(r)
	}
	*v = LaserScanView{
		Sec: int32(c.sec), Nanosec: uint32(c.nanosec),
		FrameID:  cBytes(c.frame_id, uintptr(c.frame_id_len)),
		AngleMin: float32(c.angle_min), AngleMax: float32(c.angle_max), AngleIncrement: float32(c.angle_increment),
		TimeIncrement: float32(c.time_increment), ScanTime: float32(c.scan_time),
		RangeMin: float32(c.range_min), RangeMax: float32(c.range_max),
		Ranges:      cFloats(c.ranges, uintptr(c.ranges_len)),
		Intensities: cFloats(c.intensities, uintptr(c.intensities_len)),
	}
	return c.loan, 1, 0
}

func returnLoan(rd entity, loan unsafe.Pointer) retcode {
	if rc := C.zh_return_loan(C.dds_entity_t(rd), loan); rc < 0 {
		return retcode(rc)
	}
	return 0
}

// guid is a DDS GUID: 12-byte prefix, 4-byte entity id.
type guid [16]byte

func entityGUID(e entity) (guid, retcode) {
	var g guid
	if rc := C.zh_guid(C.dds_entity_t(e), (*C.uint8_t)(unsafe.Pointer(&g[0]))); rc < 0 {
		return guid{}, retcode(rc)
	}
	return g, 0
}

func createDiscoveryWriter(pp entity, gidSize int, userData string) (entity, retcode) {
	cu := C.CString(userData)
	defer C.free(unsafe.Pointer(cu))
	w := C.zh_discovery_writer(C.dds_entity_t(pp), C.int(gidSize), cu)
	if w < 0 {
		return 0, retcode(w)
	}
	return entity(w), 0
}

// writeDiscovery writes the participant's graph sample: one node owning
// readers and writers. The GUID slices are Go memory that C reads during
// the call only (they hold no pointers).
func writeDiscovery(w entity, gidSize int, pp guid, ns, name string, readers, writers []guid) retcode {
	cns, cname := C.CString(ns), C.CString(name)
	defer C.free(unsafe.Pointer(cns))
	defer C.free(unsafe.Pointer(cname))
	first := func(gs []guid) *C.uint8_t {
		if len(gs) == 0 {
			return nil
		}
		return (*C.uint8_t)(unsafe.Pointer(&gs[0][0]))
	}
	rc := C.zh_write_discovery(C.dds_entity_t(w), C.int(gidSize), (*C.uint8_t)(unsafe.Pointer(&pp[0])), cns, cname,
		first(readers), C.uint32_t(len(readers)), first(writers), C.uint32_t(len(writers)))
	if rc < 0 {
		return retcode(rc)
	}
	return 0
}

// createBuiltinReader reads DCPSPublication (publications) or
// DCPSSubscription: the endpoints discovery reports.
func createBuiltinReader(pp entity, publications bool) (entity, retcode) {
	e := C.zh_builtin_reader(C.dds_entity_t(pp), cBool(publications))
	if e < 0 {
		return 0, retcode(e)
	}
	return entity(e), 0
}

// discovered is one sample of a built-in endpoint reader.
type discovered struct {
	topic, typ  string // DDS names
	participant guid
	alive       bool
}

// takeDiscovered takes one built-in endpoint sample; ok is false when
// the reader holds none.
func takeDiscovered(rd entity) (d discovered, ok bool, rc retcode) {
	var topic, typ [256]C.char
	var pg [16]C.uint8_t
	n := C.zh_take_endpoint(C.dds_entity_t(rd), &topic[0], C.size_t(len(topic)), &typ[0], C.size_t(len(typ)), &pg[0])
	if n < 0 {
		return d, false, retcode(n)
	}
	if n == 0 {
		return d, false, 0
	}
	for i := range pg {
		d.participant[i] = byte(pg[i])
	}
	d.topic, d.typ, d.alive = C.GoString(&topic[0]), C.GoString(&typ[0]), n == 1
	return d, true, 0
}

// paramRec is C's zh_param_rec laid out in Go, so that the parameter
// server fills a reused Go slice of them; the arrays below fail to compile
// if the layouts differ.
type paramRec struct {
	name, stringValue, description, constraints, reason uint32 // offsets into the strings buffer
	typ, boolValue, readOnly, successful, hasRange      uint8
	integerValue                                        int64
	doubleValue                                         float64
	rangeFrom, rangeTo, rangeStep                       float64
}

// paramValueRec is C's zh_param_value.
type paramValueRec struct {
	typ, boolValue uint8
	integerValue   int64
	doubleValue    float64
}

var (
	_ [unsafe.Sizeof(C.zh_param_rec{}) - unsafe.Sizeof(paramRec{})]byte
	_ [unsafe.Sizeof(paramRec{}) - unsafe.Sizeof(C.zh_param_rec{})]byte
	_ [unsafe.Offsetof(C.zh_param_rec{}.double_value) - unsafe.Offsetof(paramRec{}.doubleValue)]byte
	_ [unsafe.Offsetof(paramRec{}.doubleValue) - unsafe.Offsetof(C.zh_param_rec{}.double_value)]byte
	_ [unsafe.Offsetof(C.zh_param_rec{}.successful) - unsafe.Offsetof(paramRec{}.successful)]byte
	_ [unsafe.Offsetof(paramRec{}.successful) - unsafe.Offsetof(C.zh_param_rec{}.successful)]byte
	_ [unsafe.Offsetof(C.zh_param_rec{}.has_range) - unsafe.Offsetof(paramRec{}.hasRange)]byte
	_ [unsafe.Offsetof(paramRec{}.hasRange) - unsafe.Offsetof(C.zh_param_rec{}.has_range)]byte
	_ [unsafe.Offsetof(C.zh_param_rec{}.range_from) - unsafe.Offsetof(paramRec{}.rangeFrom)]byte
	_ [unsafe.Offsetof(paramRec{}.rangeFrom) - unsafe.Offsetof(C.zh_param_rec{}.range_from)]byte
	_ [unsafe.Sizeof(C.zh_param_value{}) - unsafe.Sizeof(paramValueRec{})]byte
	_ [unsafe.Sizeof(paramValueRec{}) - unsafe.Sizeof(C.zh_param_value{})]byte
	_ [unsafe.Offsetof(C.zh_param_value{}.double_value) - unsafe.Offsetof(paramValueRec{}.doubleValue)]byte
	_ [unsafe.Offsetof(paramValueRec{}.doubleValue) - unsafe.Offsetof(C.zh_param_value{}.double_value)]byte
)

// requestBuf is a zh_request in C memory: C stores the loan pointer in
// it, and the Go heap holds no pointer written by C.
type requestBuf struct{ p *C.zh_request }

func newRequestBuf() requestBuf {
	return requestBuf{(*C.zh_request)(C.calloc(1, C.size_t(unsafe.Sizeof(C.zh_request{}))))}
}
func (b requestBuf) free() { C.free(unsafe.Pointer(b.p)) }

// request is what takeRequest read of a request's header and sizes.
type request struct {
	clientGUID uint64
	seq        int64
	writer     uint64 // publication handle of the client's request writer
	depth      uint64
	nnames     int
	bytes      int
	// tooLarge: it asked for more than maxRequestNames names or
	// maxRequestBytes of strings; taken, its loan returned, not answered.
	tooLarge bool
}

// takeRequest takes one request of service s into b: n = 1 (then the
// loan in b must go back through requestStrings and returnRequest), 0
// when the reader is empty.
func takeRequest(rd entity, s paramService, b requestBuf) (req request, n int32, rc retcode) {
	r := C.zh_take_request(C.dds_entity_t(rd), C.int(s), b.p)
	if r < 0 {
		return request{}, 0, retcode(r)
	}
	if r == 0 {
		return request{}, 0, 0
	}
	return request{clientGUID: uint64(b.p.client_guid), seq: int64(b.p.sequence_number), writer: uint64(b.p.writer),
		depth: uint64(b.p.depth), nnames: int(b.p.nnames), bytes: int(b.p.bytes)}, 1, 0
}

// requestStrings copies the taken request's strings into buf (len ≥
// request.bytes) and, for the set services, the values into values (len ≥
// nnames). Go memory without pointers, written during the call only.
func requestStrings(s paramService, b requestBuf, buf []byte, values []paramValueRec) retcode {
	var pb *C.char
	if len(buf) > 0 {
		pb = (*C.char)(unsafe.Pointer(&buf[0]))
	}
	var pv *C.zh_param_value
	if len(values) > 0 {
		pv = (*C.zh_param_value)(unsafe.Pointer(&values[0]))
	}
	if rc := C.zh_request_strings(C.int(s), b.p, pb, C.uint32_t(len(buf)), pv); rc < 0 {
		return retcode(rc)
	}
	return 0
}

// returnRequest gives the taken request's loan back.
func returnRequest(rd entity, b requestBuf) retcode {
	rc := C.zh_return_loan(C.dds_entity_t(rd), b.p.loan)
	b.p.loan = nil
	if rc < 0 {
		return retcode(rc)
	}
	return 0
}

// writeReply writes service s's reply to (clientGUID, seq) from records
// and prefix offsets into strings (Go memory without pointers, read
// during the call only).
func writeReply(w entity, s paramService, clientGUID uint64, seq int64, strings []byte, recs []paramRec, prefixes []uint32) retcode {
	var pr *C.zh_param_rec
	if len(recs) > 0 {
		pr = (*C.zh_param_rec)(unsafe.Pointer(&recs[0]))
	}
	var pp *C.uint32_t
	if len(prefixes) > 0 {
		pp = (*C.uint32_t)(unsafe.Pointer(&prefixes[0]))
	}
	rc := C.zh_write_reply(C.dds_entity_t(w), C.int(s), C.uint64_t(clientGUID), C.int64_t(seq),
		(*C.char)(unsafe.Pointer(&strings[0])), pr, C.uint32_t(len(recs)), pp, C.uint32_t(len(prefixes)))
	if rc < 0 {
		return retcode(rc)
	}
	return 0
}

// writeParameterEvent writes a ParameterEvent from node: the first nnew
// of recs are its new parameters, the rest its changed ones; their strings
// are offsets into strings (NUL-terminated, offset 0 "").
func writeParameterEvent(w entity, sec int32, nanosec uint32, node string, strings []byte, recs []paramRec, nnew int) retcode {
	cn := C.CString(node)
	defer C.free(unsafe.Pointer(cn))
	var pr *C.zh_param_rec
	if len(recs) > 0 {
		pr = (*C.zh_param_rec)(unsafe.Pointer(&recs[0]))
	}
	rc := C.zh_write_parameter_event(C.dds_entity_t(w), C.int32_t(sec), C.uint32_t(nanosec), cn,
		(*C.char)(unsafe.Pointer(&strings[0])), pr, C.uint32_t(nnew), C.uint32_t(len(recs)-nnew))
	if rc < 0 {
		return retcode(rc)
	}
	return 0
}

// clientReplyMatched: see zh_client_reply_matched (1 yes, 0 not yet, 2 gone).
func clientReplyMatched(requestReader, replyWriter entity, requestWriter uint64) (int32, retcode) {
	r := C.zh_client_reply_matched(C.dds_entity_t(requestReader), C.dds_entity_t(replyWriter), C.uint64_t(requestWriter))
	if r < 0 {
		return 0, retcode(r)
	}
	return int32(r), 0
}

func attachReader(ws, rd entity) retcode {
	if rc := C.zh_waitset_attach_reader(C.dds_entity_t(ws), C.dds_entity_t(rd)); rc < 0 {
		return retcode(rc)
	}
	return 0
}

// writeLog writes one rcl_interfaces/Log; the strings are copied to C for
// the call (log lines are rare: no reuse).
func writeLog(w entity, sec int32, nanosec uint32, level uint8, name, msg, file, function string, line uint32) retcode {
	cs := [4]*C.char{C.CString(name), C.CString(msg), C.CString(file), C.CString(function)}
	defer func() {
		for _, c := range cs {
			C.free(unsafe.Pointer(c))
		}
	}()
	if rc := C.zh_write_log(C.dds_entity_t(w), C.int32_t(sec), C.uint32_t(nanosec), C.uint8_t(level), cs[0], cs[1], cs[2], cs[3], C.uint32_t(line)); rc < 0 {
		return retcode(rc)
	}
	return 0
}

// tfRec is C's zh_tf_rec laid out in Go: takeTF fills a reused Go slice of
// them (no pointers in it); the array sizes below fail to compile if the
// two layouts ever differ.
type tfRec struct {
	translation          [3]float64
	rotation             [4]float64 // x, y, z, w
	sec                  int32
	nanosec              uint32
	parentOff, parentLen uint32 // header.frame_id in the strings buffer
	childOff, childLen   uint32 // child_frame_id
}

var (
	_ [unsafe.Sizeof(C.zh_tf_rec{}) - unsafe.Sizeof(tfRec{})]byte
	_ [unsafe.Sizeof(tfRec{}) - unsafe.Sizeof(C.zh_tf_rec{})]byte
	_ [unsafe.Offsetof(C.zh_tf_rec{}.child_len) - unsafe.Offsetof(tfRec{}.childLen)]byte
	_ [unsafe.Offsetof(tfRec{}.childLen) - unsafe.Offsetof(C.zh_tf_rec{}.child_len)]byte
	_ [unsafe.Offsetof(C.zh_tf_rec{}.sec) - unsafe.Offsetof(tfRec{}.sec)]byte
	_ [unsafe.Offsetof(tfRec{}.sec) - unsafe.Offsetof(C.zh_tf_rec{}.sec)]byte
	_ [unsafe.Offsetof(C.zh_tf_rec{}.parent_off) - unsafe.Offsetof(tfRec{}.parentOff)]byte
	_ [unsafe.Offsetof(tfRec{}.parentOff) - unsafe.Offsetof(C.zh_tf_rec{}.parent_off)]byte
)

// takeTF takes one TFMessage from rd and copies its transforms into recs
// and their frame ids into strs (both Go memory without pointers, written
// during the call only; the loan is returned before it returns). It
// returns got = 1 with n records filled of the message's total, got = 0
// when the reader is empty.
func takeTF(rd entity, recs []tfRec, strs []byte) (got int32, n, total int, rc retcode) {
	var cn, ctotal C.uint32_t
	r := C.zh_take_tf(C.dds_entity_t(rd), (*C.zh_tf_rec)(unsafe.Pointer(&recs[0])), C.uint32_t(len(recs)),
		(*C.char)(unsafe.Pointer(&strs[0])), C.size_t(len(strs)), &cn, &ctotal)
	if r <= 0 {
		return 0, 0, 0, retcode(r)
	}
	return 1, int(cn), int(ctotal), 0
}

// takeClock takes one Clock from rd: got = 1 with its time, 0 when the
// reader is empty.
func takeClock(rd entity) (got int32, sec int32, nanosec uint32, rc retcode) {
	var csec C.int32_t
	var cns C.uint32_t
	r := C.zh_take_clock(C.dds_entity_t(rd), &csec, &cns)
	if r <= 0 {
		return 0, 0, 0, retcode(r)
	}
	return 1, int32(csec), uint32(cns), 0
}
