// Package exchange carries entries between the subtasks of a job: one
// channel per (edge, producer subtask, consumer subtask), each an ordered
// stream of data entries (Arrow IPC payloads) and control entries
// (watermarks, checkpoint barriers, end of stream).
//
// Flow control is credit based. A consumer grants each input channel a
// number of credits; a producer spends one per data entry and blocks when it
// has none; the consumer returns the credit when it has consumed the entry.
// So the data buffered in a channel is bounded by credits × entry size, and
// a slow consumer backpressures its producers back to the sources. Control
// entries never wait for credit. The protocol itself (a credit limit the
// consumer raises, sequence numbers that expose lost entries) is a plain
// data structure in creditwindow.go that both transports drive.
//
// Two transports implement the same semantics and pass the same contract
// suite (package exchangetest): Redis streams (NewRedis), for jobs spread
// over worker processes, and an in-process one (NewLocal) for the embedded
// single-process mode.
//
// A task's loop reads its inputs, pausing an input between a barrier and
// the moment that barrier has come on every input:
//
//	for {
//		i, e, ok, err := r.Read(ctx, bufferTimeout)
//		if err != nil {
//			return err // ErrChannelLost: the attempt is over
//		}
//		if !ok {
//			flushOutputs()
//			continue
//		}
//		switch e.Kind {
//		case exchange.KindData:
//			process(e.Payload) // valid until the next Read
//		case exchange.KindBarrier:
//			r.Pause(i)
//			if aligner.arrived(i, e.Value) { // on every input now
//				snapshot(e.Value)
//				forward(exchange.Entry{Kind: exchange.KindBarrier, Value: e.Value})
//				resumeAll(r)
//			}
//		case exchange.KindWatermark, exchange.KindEnd:
//			...
//		}
//	}
package exchange
