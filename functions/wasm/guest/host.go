package guest

// host is the ABI's import module weir, one method per host function.
// Byte arguments are read during the call only; out arguments are filled
// up to their length, and a result greater than that length means nothing
// was copied (see readInto). host_wasip1.go implements it with
// //go:wasmimport; tests use a fake.
type host interface {
	fail(h int32, msg string)
	log(level Level, msg string)
	emit(payload []byte) int32
	state(kind int32, name string) int32
	key(h int32, out []byte) int32
	watermark() int64
	processingTime() int64

	valueGet(st, h int32, ns string, out []byte) int32
	valuePut(st, h int32, ns string, v []byte)
	valueDelete(st, h int32, ns string)

	listGet(st, h int32, ns string, out []byte) int32
	listAdd(st, h int32, ns string, v []byte)
	listClear(st, h int32, ns string)

	mapGet(st, h int32, ns string, k, out []byte) int32
	mapPut(st, h int32, ns string, k, v []byte)
	mapDelete(st, h int32, ns string, k []byte)
	mapEntries(st, h int32, ns string, out []byte) int32
	mapClear(st, h int32, ns string)

	timerRegister(h int32, d TimeDomain, ts int64)
	timerDelete(h int32, d TimeDomain, ts int64)
}

// State kinds of the state host function.
const (
	kindValue int32 = 0
	kindList  int32 = 1
	kindMap   int32 = 2
)
