package exchange

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/integration/tracetest"
)

func atoi64(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q in trace", s)
	}
	return n
}

// TestProducerWindowTraces runs testdata/creditwindow/producer.txt.
// Commands:
//
//	new                   start a new producer window
//	observe <limit>|none  the producer reads the limit (none: no limit key)
//	spend                 spend one credit: ok, or no credit
//	avail                 print the credits available
func TestProducerWindowTraces(t *testing.T) {
	tracetest.Run(t, "testdata/creditwindow/producer.txt", func(t *testing.T) tracetest.Func {
		var w producerWindow
		return func(t *testing.T, td *datadriven.TestData) (string, error) {
			cmd, args := td.Cmd, tracetest.Words(td)
			switch cmd {
			case "new":
				w = producerWindow{}
				return "ok", nil
			case "observe":
				var err error
				if args[0] == "none" {
					err = w.observe(0, false)
				} else {
					err = w.observe(atoi64(t, args[0]), true)
				}
				return "ok", err
			case "spend":
				if w.spend() {
					return "ok", nil
				}
				return "no credit", nil
			case "avail":
				return strconv.FormatInt(w.available(), 10), nil
			}
			t.Fatalf("unknown command %q", cmd)
			return "", nil
		}
	})
}

// TestConsumerWindowTraces runs testdata/creditwindow/consumer.txt.
// Commands:
//
//	new <window> <batch>        start a new consumer window
//	recv <seq> data|ctl         an entry is read from the channel
//	consume <seq> data|ctl      the caller is done with an entry
//	state                       print outstanding, limit and due
//	pending                     print what the consumer should announce
//	announced                   the last pending values reached the channel
func TestConsumerWindowTraces(t *testing.T) {
	tracetest.Run(t, "testdata/creditwindow/consumer.txt", func(t *testing.T) tracetest.Func {
		var (
			w         consumerWindow
			lastLimit int64
			lastKeep  uint64
		)
		return func(t *testing.T, td *datadriven.TestData) (string, error) {
			cmd, args := td.Cmd, tracetest.Words(td)
			switch cmd {
			case "new":
				w = newConsumerWindow(int(atoi64(t, args[0])), int(atoi64(t, args[1])))
				return "ok", nil
			case "recv", "consume":
				seq := uint64(atoi64(t, args[0]))
				data := args[1] == "data"
				if cmd == "recv" {
					return "ok", w.receive(seq, data)
				}
				return "ok", w.consume(seq, data)
			case "state":
				return fmt.Sprintf("outstanding=%d limit=%d due=%t", w.outstanding(), w.limit(), w.due()), nil
			case "pending":
				limit, announce, keep, trim := w.pending()
				lastLimit, lastKeep = limit, keep
				return fmt.Sprintf("limit=%d announce=%t keep=%d trim=%t", limit, announce, keep, trim), nil
			case "announced":
				w.announced(lastLimit, lastKeep)
				return "ok", nil
			}
			t.Fatalf("unknown command %q", cmd)
			return "", nil
		}
	})
}

// TestCreditWindowsTogether drives a producer and a consumer window through
// a simulated channel with random interleavings and checks the protocol's
// promises: the channel never holds more than window data entries, every
// entry arrives once and in order, and credit always comes back.
func TestCreditWindowsTogether(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		window := 1 + rng.IntN(5)
		batch := 1 + rng.IntN(window)
		const total = 300

		var (
			p        producerWindow
			c        = newConsumerWindow(window, batch)
			stream   []uint64 // sequence numbers stored, oldest first
			isData   = map[uint64]bool{}
			limitKey = int64(window) // what the channel stores as the limit
			seq      uint64
			read     uint64 // last sequence number the consumer fetched
			held     []uint64
			prev     uint64 // entry handed out by the last read, 0 if none
			got      []uint64
		)
		for steps := 0; len(got) < total; steps++ {
			if steps > 100*total {
				t.Fatalf("seed %d: no progress: got %d entries", seed, len(got))
			}
			switch rng.IntN(4) {
			case 0, 1: // producer writes, if it may
				if int(seq) >= total {
					continue
				}
				data := rng.IntN(4) > 0
				if data {
					if err := p.observe(limitKey, true); err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
					if !p.spend() {
						continue
					}
				}
				seq++
				isData[seq] = data
				stream = append(stream, seq)
				dataInStream := 0
				for _, s := range stream {
					if isData[s] {
						dataInStream++
					}
				}
				if dataInStream > window {
					t.Fatalf("seed %d: %d data entries stored, window %d", seed, dataInStream, window)
				}
			case 2: // consumer fetches what is stored after its position
				for _, s := range stream {
					if s > read {
						if err := c.receive(s, isData[s]); err != nil {
							t.Fatalf("seed %d: %v", seed, err)
						}
						read = s
						held = append(held, s)
					}
				}
			case 3: // consumer reads one: the previous one is consumed
				if prev != 0 {
					if err := c.consume(prev, isData[prev]); err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
					prev = 0
				}
				if len(held) > 0 {
					prev, held = held[0], held[1:]
					got = append(got, prev)
				}
				// Announce when due, or when it is about to wait for more.
				if c.due() || len(held) == 0 {
					limit, announce, keep, trim := c.pending()
					if trim {
						for len(stream) > 0 && stream[0] < keep {
							stream = stream[1:]
						}
					}
					if announce {
						limitKey = limit
					}
					c.announced(limit, keep)
				}
			}
		}
		for i, s := range got {
			if s != uint64(i+1) {
				t.Fatalf("seed %d: entry %d has sequence number %d", seed, i, s)
			}
		}
	}
}
