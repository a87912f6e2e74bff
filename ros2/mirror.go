//go:build ros2 && cgo

package ros2

/*
#include <stdlib.h>
#include "mirror.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/zerohop/zerohop/handles"
)

// MirrorWriter republishes camera frames as full sensor_msgs/Image or
// PointCloud2 messages, so that ROS tools (rviz, ros2 topic echo) can look
// at what zerohop's pipeline sees. Serializing a frame costs a copy of it:
// callers publish only while Matched() > 0. Publish is safe for concurrent
// use, allocates nothing, and does not wait for subscribers, RELIABLE ones
// included (see mirrorMaxBlocking): one that falls behind misses frames.
type MirrorWriter struct {
	ep  *endpoint
	hdr *C.zh_mirror_hdr // C scratch reused by every Publish; freed when the endpoint closes
}

// mirrorMaxBlocking is every mirror's max_blocking_time. A mirror is
// published from the camera's frame path, which must never wait for a
// subscriber. What dds_write does in Cyclone DDS 0.10:
//
//   - A RELIABLE writer waits (throttle_writer, from write_sample_eot in
//     src/core/ddsi/src/q_transmit.c) while the bytes its readers have not
//     acknowledged exceed its WHC high-water mark, up to max_blocking_time
//     (DDS default 100 ms), then fails with DDS_RETCODE_TIMEOUT. A
//     KEEP_LAST writer's watermarks are INT32_MAX, though ("aggressive
//     keep last", the writer's init in src/core/ddsi/src/ddsi_endpoint.c),
//     so it never waits for acknowledgements: its history keeps the last
//     depth samples for retransmission and drops an overwritten one even
//     if unacknowledged (whc_default_insert, src/core/ddsc/src/dds_whc.c);
//     a subscriber that falls behind is sent a GAP for what it missed.
//   - Delivery to a reader in this process whose history refuses the
//     sample (KEEP_ALL with resource limits) is retried for up to
//     max_blocking_time (deliver_locally, src/core/ddsc/src/dds_write.c).
//
// So mirrors are KEEP_LAST (depth 1 when RELIABLE: Cyclone keeps one
// serialized frame, and retransmits only the newest), and their
// max_blocking_time is 0, so that whatever Cyclone would wait for fails
// at once with DDS_RETCODE_TIMEOUT: the frame is dropped and the caller
// counts the error. TestReliableMirrorNeverWaitsForAStalledSubscriber
// checks this against a subscriber stopped with SIGSTOP (a KEEP_ALL writer
// with 100 ms takes 100 ms per write there).
const mirrorMaxBlocking = 0

// NewImageMirror creates a sensor_msgs/Image mirror publisher on topic,
// resolved against the participant's node (Config.ResolveTopic).
// The zero q is sensor data QoS (BEST_EFFORT, KEEP_LAST 5); RELIABLE
// defaults to KEEP_LAST 1. A BEST_EFFORT mirror never matches a RELIABLE
// subscriber (rviz2's default); a RELIABLE one matches both kinds.
func (p *Participant) NewImageMirror(topic string, q QoS) (*MirrorWriter, error) {
	return p.newMirror(typeImage, topic, q)
}

// NewPointCloud2Mirror creates a sensor_msgs/PointCloud2 mirror publisher,
// with QoS as NewImageMirror.
func (p *Participant) NewPointCloud2Mirror(topic string, q QoS) (*MirrorWriter, error) {
	return p.newMirror(typePointCloud2, topic, q)
}

func (p *Participant) newMirror(t msgType, topic string, q QoS) (*MirrorWriter, error) {
	def := SensorDataQoS()
	if q.Reliability == Reliable {
		def.Depth = 1
	}
	q, err := q.resolve(def)
	if err != nil {
		return nil, err
	}
	w := &MirrorWriter{hdr: (*C.zh_mirror_hdr)(C.calloc(1, C.size_t(unsafe.Sizeof(C.zh_mirror_hdr{}))))}
	if w.ep, err = p.newEndpoint(t, topic, true, q, mirrorMaxBlocking, func() { C.free(unsafe.Pointer(w.hdr)) }); err != nil {
		return nil, err
	}
	p.log.Info("ros2: mirror publisher (publishes only while a subscriber is matched)", zapTopic(w.ep), zapQoS(q))
	return w, nil
}

// Publish writes the frame h describes, whose payload is data[:h.Length]
// (an image's rows, or points with float32 x, y, z, intensity at h's
// offsets). h must match the writer's type.
func (w *MirrorWriter) Publish(h *handles.Handle, data []byte) error {
	ep := w.ep
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.closed {
		return ErrClosed
	}
	if uint64(len(data)) < h.Length || h.Length > 1<<32-1 {
		return fmt.Errorf("ros2: mirror %s: payload %d bytes, handle says %d", ep.rosTopic, len(data), h.Length)
	}
	var ptr *C.uint8_t
	if h.Length > 0 {
		ptr = (*C.uint8_t)(unsafe.Pointer(&data[0]))
	}
	s := w.hdr
	s.sec, s.nanosec = 0, 0
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
		s.frame_id[i] = C.char(c) // frame_id[16] stays NUL (calloc)
	}
	var rc C.dds_return_t
	switch {
	case ep.typ == typeImage && h.Kind == handles.KindImage:
		enc := h.Image.Encoding.String()
		for i := range len(s.encoding) - 1 {
			c := byte(0)
			if i < len(enc) {
				c = enc[i]
			}
			s.encoding[i] = C.char(c)
		}
		rc = C.zh_write_image(C.dds_entity_t(ep.e), s, C.uint32_t(h.Image.Width), C.uint32_t(h.Image.Height),
			C.uint32_t(h.Image.RowStep), ptr, C.uint32_t(h.Length))
	case ep.typ == typePointCloud2 && h.Kind == handles.KindPoints:
		s.offsets[0], s.offsets[1] = C.uint16_t(h.Points.X), C.uint16_t(h.Points.Y)
		s.offsets[2], s.offsets[3] = C.uint16_t(h.Points.Z), C.uint16_t(h.Points.Intensity)
		rc = C.zh_write_cloud(C.dds_entity_t(ep.e), s, C.uint32_t(h.Points.Count), C.uint32_t(h.Points.Step), ptr, C.uint32_t(h.Length))
	default:
		return fmt.Errorf("ros2: mirror %s (%s): handle of kind %d", ep.rosTopic, ep.typ.rosName(), h.Kind)
	}
	if rc < 0 { // DDS_RETCODE_TIMEOUT: dropped rather than waited for (mirrorMaxBlocking)
		return &ddsError{op: "write " + ep.ddsTopic, rc: retcode(rc)}
	}
	return nil
}

// Matched returns how many subscribers are matched now.
func (w *MirrorWriter) Matched() int { return int(w.ep.matched.Load()) }

// Close deletes the publisher.
func (w *MirrorWriter) Close() error { return w.ep.close() }
