package exchange

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// runTrace runs a script of "command args => expected output" lines through
// do and compares every output. Blank lines and lines starting with # are
// skipped.
func runTrace(t *testing.T, trace string, do func(cmd string, args []string) string) {
	t.Helper()
	for n, line := range strings.Split(trace, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		in, want, found := strings.Cut(line, "=>")
		if !found {
			t.Fatalf("line %d: %q has no =>", n+1, line)
		}
		fields := strings.Fields(in)
		got := do(fields[0], fields[1:])
		if want = strings.TrimSpace(want); got != want {
			t.Errorf("line %d: %s\n got: %s\nwant: %s", n+1, strings.TrimSpace(in), got, want)
		}
	}
}

func okOrErr(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func atoi64(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q in trace", s)
	}
	return n
}

func TestProducerWindowTraces(t *testing.T) {
	for _, tc := range []struct{ name, trace string }{
		{"waits for the consumer", `
			avail        => 0
			spend        => no credit
			# no limit yet is not a loss: the consumer may start later
			observe none => ok
			spend        => no credit
			observe 2    => ok
			avail        => 2
			spend        => ok
			spend        => ok
			spend        => no credit
			avail        => 0
		`},
		{"limit grows as the consumer consumes", `
			observe 3 => ok
			spend     => ok
			spend     => ok
			spend     => ok
			spend     => no credit
			# an unchanged limit gives nothing
			observe 3 => ok
			spend     => no credit
			# the consumer consumed two
			observe 5 => ok
			avail     => 2
			spend     => ok
			avail     => 1
		`},
		{"a vanished limit is a lost channel", `
			observe 4    => ok
			spend        => ok
			observe none => error: credit limit vanished (was 4): exchange: channel lost
		`},
		{"a limit going back is a lost channel", `
			observe 6 => ok
			observe 4 => error: credit limit went back from 6 to 4: exchange: channel lost
		`},
		{"a non-positive limit is invalid", `
			observe 0 => error: invalid credit limit 0
		`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w producerWindow
			runTrace(t, tc.trace, func(cmd string, args []string) string {
				switch cmd {
				case "observe":
					if args[0] == "none" {
						return okOrErr(w.observe(0, false))
					}
					return okOrErr(w.observe(atoi64(t, args[0]), true))
				case "spend":
					if w.spend() {
						return "ok"
					}
					return "no credit"
				case "avail":
					return strconv.FormatInt(w.available(), 10)
				}
				t.Fatalf("unknown command %q", cmd)
				return ""
			})
		})
	}
}

func TestConsumerWindowTraces(t *testing.T) {
	for _, tc := range []struct{ name, trace string }{
		{"window bounds outstanding data", `
			new 2 1        => ok
			recv 1 data    => ok
			# control entries take no credit
			recv 2 ctl     => ok
			recv 3 data    => ok
			state          => outstanding=2 limit=2 due=false
			recv 4 data    => error: data entry 4 beyond a window of 2: producer exceeded its credit
			recv 4 ctl     => ok
		`},
		{"consumed credit is announced after trimming", `
			new 2 1        => ok
			recv 1 data    => ok
			recv 2 data    => ok
			pending        => limit=2 announce=false keep=1 trim=false
			consume 1 data => ok
			state          => outstanding=1 limit=3 due=true
			pending        => limit=3 announce=true keep=2 trim=true
			announced      => ok
			pending        => limit=3 announce=false keep=2 trim=false
			state          => outstanding=1 limit=3 due=false
			# the producer may now write one more
			recv 3 data    => ok
			recv 4 data    => error: data entry 4 beyond a window of 2: producer exceeded its credit
		`},
		{"returns are batched", `
			new 8 2        => ok
			recv 1 data    => ok
			recv 2 data    => ok
			recv 3 data    => ok
			consume 1 data => ok
			state          => outstanding=2 limit=9 due=false
			consume 2 data => ok
			state          => outstanding=1 limit=10 due=true
			pending        => limit=10 announce=true keep=3 trim=true
			announced      => ok
			state          => outstanding=1 limit=10 due=false
		`},
		{"consumed control entries are trimmed but give no credit", `
			new 2 1        => ok
			recv 1 ctl     => ok
			recv 2 ctl     => ok
			consume 1 ctl  => ok
			consume 2 ctl  => ok
			state          => outstanding=0 limit=2 due=false
			pending        => limit=2 announce=false keep=3 trim=true
			announced      => ok
			pending        => limit=2 announce=false keep=3 trim=false
		`},
		{"a failed round trip is retried", `
			new 1 1        => ok
			recv 1 data    => ok
			consume 1 data => ok
			pending        => limit=2 announce=true keep=2 trim=true
			# no announced: the round trip failed; the same values are due again
			pending        => limit=2 announce=true keep=2 trim=true
			recv 2 ctl     => ok
			consume 2 ctl  => ok
			pending        => limit=2 announce=true keep=3 trim=true
			announced      => ok
			pending        => limit=2 announce=false keep=3 trim=false
		`},
		{"a sequence gap is a lost channel", `
			new 4 1     => ok
			recv 1 data => ok
			recv 3 data => error: entry 3 follows entry 1: exchange: channel lost
			recv 1 data => error: entry 1 follows entry 1: exchange: channel lost
			recv 2 data => ok
		`},
		{"consumption follows receipt in order", `
			new 4 1        => ok
			consume 1 data => error: consume entry 1: consumed up to 0, received up to 0
			recv 1 ctl     => ok
			recv 2 ctl     => ok
			consume 2 ctl  => error: consume entry 2: consumed up to 0, received up to 2
			consume 1 ctl  => ok
			consume 2 data => error: consume entry 2: no data entry outstanding
		`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w consumerWindow
			var lastLimit int64
			var lastKeep uint64
			runTrace(t, tc.trace, func(cmd string, args []string) string {
				switch cmd {
				case "new":
					w = newConsumerWindow(int(atoi64(t, args[0])), int(atoi64(t, args[1])))
					return "ok"
				case "recv", "consume":
					seq := uint64(atoi64(t, args[0]))
					data := args[1] == "data"
					if cmd == "recv" {
						return okOrErr(w.receive(seq, data))
					}
					return okOrErr(w.consume(seq, data))
				case "state":
					return fmt.Sprintf("outstanding=%d limit=%d due=%t", w.outstanding(), w.limit(), w.due())
				case "pending":
					limit, announce, keep, trim := w.pending()
					lastLimit, lastKeep = limit, keep
					return fmt.Sprintf("limit=%d announce=%t keep=%d trim=%t", limit, announce, keep, trim)
				case "announced":
					w.announced(lastLimit, lastKeep)
					return "ok"
				}
				t.Fatalf("unknown command %q", cmd)
				return ""
			})
		})
	}
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
