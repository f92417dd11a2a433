//go:build wasip1

package guest

import "unsafe"

// The host functions of docs/wasm-abi.md. Pointers are offsets in linear
// memory; Go's wasm port passes unsafe.Pointer as an i32.

//go:wasmimport weir fail
func hostFail(h int32, ptr unsafe.Pointer, n int32)

//go:wasmimport weir log
func hostLog(level int32, ptr unsafe.Pointer, n int32)

//go:wasmimport weir emit
func hostEmit(ptr unsafe.Pointer, n int32) int32

//go:wasmimport weir state
func hostState(kind int32, name unsafe.Pointer, n int32) int32

//go:wasmimport weir key
func hostKey(h int32, out unsafe.Pointer, cap int32) int32

//go:wasmimport weir watermark
func hostWatermark() int64

//go:wasmimport weir processing_time
func hostProcessingTime() int64

//go:wasmimport weir value_get
func hostValueGet(st, h int32, ns unsafe.Pointer, nsLen int32, out unsafe.Pointer, cap int32) int32

//go:wasmimport weir value_put
func hostValuePut(st, h int32, ns unsafe.Pointer, nsLen int32, v unsafe.Pointer, vLen int32)

//go:wasmimport weir value_delete
func hostValueDelete(st, h int32, ns unsafe.Pointer, nsLen int32)

//go:wasmimport weir list_get
func hostListGet(st, h int32, ns unsafe.Pointer, nsLen int32, out unsafe.Pointer, cap int32) int32

//go:wasmimport weir list_add
func hostListAdd(st, h int32, ns unsafe.Pointer, nsLen int32, v unsafe.Pointer, vLen int32)

//go:wasmimport weir list_clear
func hostListClear(st, h int32, ns unsafe.Pointer, nsLen int32)

//go:wasmimport weir map_get
func hostMapGet(st, h int32, ns unsafe.Pointer, nsLen int32, k unsafe.Pointer, kLen int32, out unsafe.Pointer, cap int32) int32

//go:wasmimport weir map_put
func hostMapPut(st, h int32, ns unsafe.Pointer, nsLen int32, k unsafe.Pointer, kLen int32, v unsafe.Pointer, vLen int32)

//go:wasmimport weir map_delete
func hostMapDelete(st, h int32, ns unsafe.Pointer, nsLen int32, k unsafe.Pointer, kLen int32)

//go:wasmimport weir map_entries
func hostMapEntries(st, h int32, ns unsafe.Pointer, nsLen int32, out unsafe.Pointer, cap int32) int32

//go:wasmimport weir map_clear
func hostMapClear(st, h int32, ns unsafe.Pointer, nsLen int32)

//go:wasmimport weir timer_register
func hostTimerRegister(h, domain int32, ts int64)

//go:wasmimport weir timer_delete
func hostTimerDelete(h, domain int32, ts int64)

// wasmHost is the host through the imports above.
type wasmHost struct{}

var _ host = wasmHost{}

func sp(s string) (unsafe.Pointer, int32) { return unsafe.Pointer(unsafe.StringData(s)), int32(len(s)) }
func bp(b []byte) (unsafe.Pointer, int32) { return unsafe.Pointer(unsafe.SliceData(b)), int32(len(b)) }

func (wasmHost) fail(h int32, msg string) {
	p, n := sp(msg)
	hostFail(h, p, n)
}

func (wasmHost) log(level Level, msg string) {
	p, n := sp(msg)
	hostLog(int32(level), p, n)
}

func (wasmHost) emit(payload []byte) int32 {
	p, n := bp(payload)
	return hostEmit(p, n)
}

func (wasmHost) state(kind int32, name string) int32 {
	p, n := sp(name)
	return hostState(kind, p, n)
}

func (wasmHost) key(h int32, out []byte) int32 {
	p, n := bp(out)
	return hostKey(h, p, n)
}

func (wasmHost) watermark() int64      { return hostWatermark() }
func (wasmHost) processingTime() int64 { return hostProcessingTime() }

func (wasmHost) valueGet(st, h int32, ns string, out []byte) int32 {
	np, nn := sp(ns)
	op, on := bp(out)
	return hostValueGet(st, h, np, nn, op, on)
}

func (wasmHost) valuePut(st, h int32, ns string, v []byte) {
	np, nn := sp(ns)
	vp, vn := bp(v)
	hostValuePut(st, h, np, nn, vp, vn)
}

func (wasmHost) valueDelete(st, h int32, ns string) {
	np, nn := sp(ns)
	hostValueDelete(st, h, np, nn)
}

func (wasmHost) listGet(st, h int32, ns string, out []byte) int32 {
	np, nn := sp(ns)
	op, on := bp(out)
	return hostListGet(st, h, np, nn, op, on)
}

func (wasmHost) listAdd(st, h int32, ns string, v []byte) {
	np, nn := sp(ns)
	vp, vn := bp(v)
	hostListAdd(st, h, np, nn, vp, vn)
}

func (wasmHost) listClear(st, h int32, ns string) {
	np, nn := sp(ns)
	hostListClear(st, h, np, nn)
}

func (wasmHost) mapGet(st, h int32, ns string, k, out []byte) int32 {
	np, nn := sp(ns)
	kp, kn := bp(k)
	op, on := bp(out)
	return hostMapGet(st, h, np, nn, kp, kn, op, on)
}

func (wasmHost) mapPut(st, h int32, ns string, k, v []byte) {
	np, nn := sp(ns)
	kp, kn := bp(k)
	vp, vn := bp(v)
	hostMapPut(st, h, np, nn, kp, kn, vp, vn)
}

func (wasmHost) mapDelete(st, h int32, ns string, k []byte) {
	np, nn := sp(ns)
	kp, kn := bp(k)
	hostMapDelete(st, h, np, nn, kp, kn)
}

func (wasmHost) mapEntries(st, h int32, ns string, out []byte) int32 {
	np, nn := sp(ns)
	op, on := bp(out)
	return hostMapEntries(st, h, np, nn, op, on)
}

func (wasmHost) mapClear(st, h int32, ns string) {
	np, nn := sp(ns)
	hostMapClear(st, h, np, nn)
}

func (wasmHost) timerRegister(h int32, d TimeDomain, ts int64) { hostTimerRegister(h, int32(d), ts) }
func (wasmHost) timerDelete(h int32, d TimeDomain, ts int64)   { hostTimerDelete(h, int32(d), ts) }
