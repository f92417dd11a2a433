package exchange

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/weirstream/weir/exchange/internal/redisconn"
)

// RedisAddr is a parsed Redis address: one server (host:port) or a Redis
// Cluster (redis+cluster://host:port,host:port,..., any of its nodes).
type RedisAddr = redisconn.Addr

// ParseRedisAddr reads a Redis address as NewRedis and the control plane
// do: host:port, or redis+cluster://host:port[,host:port...].
func ParseRedisAddr(s string) (RedisAddr, error) { return redisconn.Parse(s) }

// RedisOptions configure NewRedis. A zero field takes the default shown.
type RedisOptions struct {
	// Addr is the server's host:port, or redis+cluster://host:port,... for
	// a Redis Cluster (one or more of its nodes; the client finds the
	// rest). Required.
	Addr string
	// Cluster is the cluster id whose channels these are (KeyPrefix);
	// "" is DefaultCluster.
	Cluster string
	// Username and Password authenticate: an ACL user, or Password alone
	// for a server with requirepass.
	Username string
	Password string
	// DB is the database number. Default 0, the only one a cluster has.
	DB int
	// PoolSize is the most connections open at once (per node of a
	// cluster; they are opened as needed). A Read waiting for entries
	// holds one for up to MaxBlock, so give at least one per reader plus
	// some for the writers: a worker runs a task of every vertex in each
	// of its slots, and with fewer connections than readers the writes
	// wait behind blocked reads (BenchmarkManyChannels, 48 producers × 48
	// consumers on 20 connections: no entry reached one consumer in 10 s).
	// Default 10 per GOMAXPROCS, and at least MinPoolSize.
	PoolSize int
	// DialTimeout bounds connecting. Default 5s.
	DialTimeout time.Duration
	// ReadTimeout and WriteTimeout bound one network read or write of a
	// command or pipeline. Default 5s each.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// MaxRetries is how often a command failing on the network is retried
	// (every command the transport sends is safe to retry). -1 disables
	// retries. Default 3.
	MaxRetries int
	// MaxBlock is the longest a Read blocks in one XREAD; a longer Read
	// issues several. It bounds how late a Read notices ctx being
	// cancelled (a deadline is noticed on time) and data loss. It must be
	// shorter than ReadTimeout. Default 250ms.
	MaxBlock time.Duration
	// MinCreditBackoff and MaxCreditBackoff bound the pause between two
	// looks at the credit limit of a writer waiting for credit; the pause
	// doubles from the minimum to the maximum. Defaults 100µs and 5ms.
	MinCreditBackoff time.Duration
	MaxCreditBackoff time.Duration
}

func (o RedisOptions) withDefaults() RedisOptions {
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 5 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 5 * time.Second
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 3
	}
	if o.MaxBlock == 0 {
		o.MaxBlock = 250 * time.Millisecond
	}
	if o.PoolSize == 0 {
		o.PoolSize = max(10*runtime.GOMAXPROCS(0), MinPoolSize)
	}
	if o.MinCreditBackoff == 0 {
		o.MinCreditBackoff = 100 * time.Microsecond
	}
	if o.MaxCreditBackoff == 0 {
		o.MaxCreditBackoff = 5 * time.Millisecond
	}
	return o
}

// MinPoolSize is the least RedisOptions.PoolSize is by default: 64
// tasks in a worker's slots reading at once, with as many connections
// again for their writes. Connections open only when that many are used
// at once.
const MinPoolSize = 128

// Validate reports every problem with o at once, after applying defaults.
func (o RedisOptions) Validate() error {
	o = o.withDefaults()
	var errs []error
	if a, err := redisconn.Parse(o.Addr); err != nil {
		errs = append(errs, fmt.Errorf("field Addr: %w", err))
	} else if a.Cluster && o.DB != 0 {
		errs = append(errs, fmt.Errorf("field DB is %d, want 0 with a Redis Cluster (it has only database 0)", o.DB))
	}
	if err := ValidateCluster(o.Cluster); err != nil {
		errs = append(errs, fmt.Errorf("field Cluster: %w", err))
	}
	if o.DB < 0 {
		errs = append(errs, fmt.Errorf("field DB is %d, want >= 0", o.DB))
	}
	if o.PoolSize < 0 {
		errs = append(errs, fmt.Errorf("field PoolSize is %d, want >= 0 (0: default)", o.PoolSize))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"DialTimeout", o.DialTimeout},
		{"ReadTimeout", o.ReadTimeout},
		{"WriteTimeout", o.WriteTimeout},
		{"MaxBlock", o.MaxBlock},
		{"MinCreditBackoff", o.MinCreditBackoff},
		{"MaxCreditBackoff", o.MaxCreditBackoff},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("field %s is %s, want > 0 (0: default)", d.name, d.v))
		}
	}
	if o.MaxRetries < -1 {
		errs = append(errs, fmt.Errorf("field MaxRetries is %d, want >= -1 (-1: none, 0: default)", o.MaxRetries))
	}
	if o.MaxBlock >= o.ReadTimeout {
		errs = append(errs, fmt.Errorf("field MaxBlock is %s, want less than ReadTimeout (%s)", o.MaxBlock, o.ReadTimeout))
	}
	if o.MinCreditBackoff > o.MaxCreditBackoff {
		errs = append(errs, fmt.Errorf("field MinCreditBackoff is %s, want at most MaxCreditBackoff (%s)", o.MinCreditBackoff, o.MaxCreditBackoff))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid redis options: %w", errors.Join(errs...))
	}
	return nil
}

// NewRedis returns a transport on Redis streams. It connects and checks the
// server (Redis 6.2 or later) before returning.
//
// # Keys
//
// Every key of a channel carries the consumer subtask in its hash tag, so
// all inputs of one reader sit in one Redis Cluster slot and one XREAD
// serves them:
//
//	weir:{<job>:<attempt>:<consumer vertex>:<consumer>}:ch:<edge>:<producer>   stream of entries
//	weir:{<job>:<attempt>:<consumer vertex>:<consumer>}:cr:<edge>:<producer>   credit limit (integer)
//
// Names are escaped: bytes other than ASCII letters, digits, '.', '_' and
// '-' become %XX, so ':', '{', '}' and glob characters in names cannot
// break the scheme. DeleteAttempt finds an attempt's keys with SCAN MATCH
// weir:{<job>:<attempt>:* on every primary (each master of a cluster).
//
// # Redis Cluster
//
// With Addr redis+cluster://... the transport uses the cluster client:
// every multi-key command (EXISTS and XREAD of a reader's inputs) and
// every pipeline touches one reader's keys, one hash tag, so one slot;
// go-redis follows MOVED and ASK redirects. Reads go to masters only. A
// failover that promotes a replica missing the last writes is data loss
// like a restart: it is detected as below (sequence gaps, vanished keys,
// a credit limit gone down, a writer's vanished tail) and fails the
// attempt with ErrChannelLost, and commands failing while the cluster
// changes fail the task; either way the job restarts from its latest
// checkpoint. The cluster client reloads a slot map older than a second,
// since a crashed master sends no MOVED.
//
// # Entries (format version 1)
//
// An entry is a stream entry with the explicit ID 0-<seq>, seq counting 1,
// 2, 3, ... in the channel's write order, and the fields
//
//	k  kind, one ASCII digit: 1 data, 2 watermark, 3 barrier, 4 end
//	v  value, a decimal int64 (watermark ms, checkpoint id, else 0)
//	p  payload bytes; data entries only
//
// Readers ignore fields they do not know.
//
// # Credits
//
// The reader sets each credit key to the credit limit (see the credit
// protocol in creditwindow.go): Credits at first, plus one per data entry
// consumed. A writer keeps its own count of data entries sent, reads the
// limit with GET when it has used up what it last saw (piggybacked on the
// XADD that spends the last credit), and waits with a capped exponential
// backoff while there is none. The payload never goes through a script.
// Before raising a limit the reader trims what it consumed (XTRIM MINID),
// so a stream never holds more than Credits data entries.
//
// # Detecting data loss
//
// Redis is disposable; losing its data must fail the attempt, never lose
// entries silently. Detected, as ErrChannelLost:
//   - a stream or credit key of an open reader is missing (every Read round
//     trip checks all of them with EXISTS: restart, eviction, DeleteAttempt);
//   - a credit limit that vanished or went down, seen by a writer that had
//     seen it before;
//   - a stream missing when a writer that has seen the credit limit appends
//     (XADD NOMKSTREAM: such a writer never recreates a deleted stream);
//   - an entry whose sequence number does not follow the last one read
//     (entries lost in between, e.g. a stream recreated by a writer);
//   - a writer waiting for credit whose last entry is gone under an
//     unchanged limit (a failover to a replica that lacked the tail);
//   - on a cluster, an end entry no replica acknowledged (WAIT) within
//     2s: not a loss yet, but nothing after it would show one.
//
// Not detected: a writer that never saw the credit limit (its reader has
// not started) and only writes control entries recreates a lost stream
// without noticing; its reader notices when it starts, as the sequence
// numbers do not start at 1. Loss is noticed at the next Read round trip,
// so a reader blocked in XREAD notices within MaxBlock.
func NewRedis(opts RedisOptions) (Transport, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	addr, _ := redisconn.Parse(opts.Addr) // checked by Validate
	client, err := redisconn.New(addr, redis.Options{
		Username:     opts.Username,
		Password:     opts.Password,
		DB:           opts.DB,
		PoolSize:     opts.PoolSize,
		DialTimeout:  opts.DialTimeout,
		ReadTimeout:  opts.ReadTimeout,
		WriteTimeout: opts.WriteTimeout,
		MaxRetries:   opts.MaxRetries,
		// Deadlines of the caller's ctx bound network reads and writes.
		ContextTimeoutEnabled: true,
		// One pool for commands and pipelines, sized by PoolSize.
		PipelinePoolSize: -1,
		// RESP2: no push frames to look for around every pipeline.
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.DialTimeout+opts.ReadTimeout)
	defer cancel()
	if err := checkServer(ctx, client); err != nil {
		return nil, errors.Join(fmt.Errorf("connect to redis at %s: %w", opts.Addr, err), client.Close())
	}
	return &redisTransport{client: client, opts: opts, prefix: KeyPrefix(opts.Cluster)}, nil
}

// checkServer checks that every primary answers and has the commands the
// transport uses (XADD NOMKSTREAM and XTRIM MINID came with Redis 6.2).
func checkServer(ctx context.Context, client redis.UniversalClient) error {
	return redisconn.ForEachPrimary(ctx, client, func(ctx context.Context, node *redis.Client) error {
		if err := checkNode(ctx, node); err != nil {
			return fmt.Errorf("node %s: %w", redisconn.NodeAddr(node), err)
		}
		return nil
	})
}

func checkNode(ctx context.Context, client *redis.Client) error {
	info, err := client.Info(ctx, "server").Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOPERM") {
		// A user without INFO can still run the transport's commands.
		return client.Ping(ctx).Err()
	}
	if err != nil {
		return err
	}
	for line := range strings.Lines(info) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		var major, minor int
		if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err == nil && (major < 6 || major == 6 && minor < 2) {
			return fmt.Errorf("server is redis %s, want 6.2 or later", v)
		}
	}
	return nil
}

type redisTransport struct {
	client redis.UniversalClient // *redis.Client or *redis.ClusterClient
	opts   RedisOptions
	prefix string // KeyPrefix(opts.Cluster)

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var _ Transport = (*redisTransport)(nil)

// mapErr turns a failed command's error into what the caller acts on:
// a lost channel stays lost; otherwise ErrClosed after Close, ctx's error
// when ctx ended, else err.
func (t *redisTransport) mapErr(ctx context.Context, err error) error {
	switch {
	case err == nil || errors.Is(err, ErrChannelLost):
		return err
	case t.closed.Load() || errors.Is(err, redis.ErrClosed):
		return ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

func (t *redisTransport) NewWriter(ch Channel) (Writer, error) {
	if err := ch.validate(); err != nil {
		return nil, err
	}
	if t.closed.Load() {
		return nil, ErrClosed
	}
	w := &redisWriter{t: t, ch: ch}
	w.stream, w.credit = channelKeys(t.prefix, ch)
	return w, nil
}

// initGroup is a consumer group that lives only during NewReader: creating
// it with MKSTREAM is the one way to create an empty stream without
// advancing its last ID.
const initGroup = "weir-init"

func (t *redisTransport) NewReader(ctx context.Context, inputs []Channel, opts ReaderOptions) (Reader, error) {
	if err := validateInputs(inputs); err != nil {
		return nil, err
	}
	if t.closed.Load() {
		return nil, ErrClosed
	}
	opts = opts.withDefaults()
	n := len(inputs)
	r := &redisReader{
		t:       t,
		name:    consumerName(inputs[0]),
		inputs:  inputs,
		streams: make([]string, n),
		credits: make([]string, n),
		index:   make(map[string]int, n),
		wins:    make([]consumerWindow, n),
		bufs:    make([][]bufferedEntry, n),
		paused:  make([]bool, n),
		count:   int64(opts.Credits) + 64,
	}
	// Create each stream before its credit limit: a writer that has seen
	// the limit can then append with NOMKSTREAM.
	pipe := t.client.Pipeline()
	created := make([]*redis.BoolCmd, n)
	for i, ch := range inputs {
		r.streams[i], r.credits[i] = channelKeys(t.prefix, ch)
		r.index[r.streams[i]] = i
		r.wins[i] = newConsumerWindow(opts.Credits, max(1, opts.Credits/4))
		pipe.XGroupCreateMkStream(ctx, r.streams[i], initGroup, "$")
		pipe.XGroupDestroy(ctx, r.streams[i], initGroup)
		created[i] = pipe.SetNX(ctx, r.credits[i], opts.Credits, 0)
	}
	r.keys = append(append(r.keys, r.streams...), r.credits...)
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		for _, c := range cmds {
			// A group left behind by an interrupted NewReader is harmless.
			if err := c.Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
				return nil, fmt.Errorf("initialise channels of %s: %w", r.name, t.mapErr(ctx, err))
			}
		}
	}
	for i, c := range created {
		if !c.Val() {
			return nil, errReaderExists(inputs[i])
		}
	}
	return r, nil
}

func (t *redisTransport) DeleteAttempt(ctx context.Context, job string, attempt int) error {
	if job == "" {
		return errors.New("delete attempt: job is empty")
	}
	if t.closed.Load() {
		return ErrClosed
	}
	err := t.scan(ctx, attemptPattern(t.prefix, job, attempt), func(keys []string) error {
		// One UNLINK per key: the keys of one SCAN reply may sit in
		// different slots of a cluster, which one command may not span.
		// The cluster client routes each to its slot's current master.
		pipe := t.client.Pipeline()
		for _, k := range keys {
			pipe.Unlink(ctx, k)
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete attempt %d of job %q: %w", attempt, job, t.mapErr(ctx, err))
	}
	return nil
}

// CountKeys counts the keys of a job's attempt (attempt < 0: of every
// attempt). Tests use it to check DeleteAttempt.
func (t *redisTransport) CountKeys(ctx context.Context, job string, attempt int) (int, error) {
	var n atomic.Int64
	err := t.scan(ctx, attemptPattern(t.prefix, job, attempt), func(keys []string) error {
		n.Add(int64(len(keys)))
		return nil
	})
	return int(n.Load()), t.mapErr(ctx, err)
}

// scan calls fn with every batch of keys matching pattern, scanning every
// primary (each master of a cluster, concurrently: fn must be safe for
// concurrent use).
func (t *redisTransport) scan(ctx context.Context, pattern string, fn func(keys []string) error) error {
	return redisconn.ForEachPrimary(ctx, t.client, func(ctx context.Context, node *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return fmt.Errorf("scan %s: %w", redisconn.NodeAddr(node), err)
			}
			if len(keys) > 0 {
				if err := fn(keys); err != nil {
					return err
				}
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	})
}

func (t *redisTransport) Close() error {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		t.closeErr = t.client.Close()
	})
	return t.closeErr
}

// Keys.

// escapeName escapes s for use in a key: bytes other than ASCII letters,
// digits, '.', '_' and '-' become %XX. The result has no ':', '{', '}' or
// glob characters, and distinct names stay distinct.
func escapeName(s string) string {
	const hex = "0123456789ABCDEF"
	plain := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	n := 0
	for i := range len(s) {
		if !plain(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := range len(s) {
		if c := s[i]; plain(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(b)
}

// channelKeys returns the stream and credit keys of ch, below prefix.
func channelKeys(prefix string, ch Channel) (stream, credit string) {
	base := prefix + "{" + escapeName(ch.Job) + ":" + strconv.Itoa(ch.Attempt) + ":" +
		escapeName(ch.ConsumerVertex) + ":" + strconv.Itoa(ch.Consumer) + "}:"
	tail := escapeName(ch.Edge) + ":" + strconv.Itoa(ch.Producer)
	return base + "ch:" + tail, base + "cr:" + tail
}

// attemptPattern matches every key of a job's attempt (attempt < 0: of
// every attempt) and nothing else.
func attemptPattern(prefix, job string, attempt int) string {
	if attempt < 0 {
		return prefix + "{" + escapeName(job) + ":*"
	}
	return prefix + "{" + escapeName(job) + ":" + strconv.Itoa(attempt) + ":*"
}

func consumerName(ch Channel) string {
	return fmt.Sprintf("%s/%d %s[%d]", ch.Job, ch.Attempt, ch.ConsumerVertex, ch.Consumer)
}

// Entries.

const (
	fieldKind    = "k"
	fieldValue   = "v"
	fieldPayload = "p"
)

func entryID(seq uint64) string { return "0-" + strconv.FormatUint(seq, 10) }

// appendEntryValues appends e's stream fields to vals.
func appendEntryValues(vals []any, e Entry) []any {
	vals = append(vals,
		fieldKind, strconv.Itoa(int(e.Kind)),
		fieldValue, strconv.FormatInt(e.Value, 10))
	if e.Kind == KindData {
		vals = append(vals, fieldPayload, e.Payload)
	}
	return vals
}

var errCorrupt = errors.New("corrupt entry")

// decodeEntry decodes a stream entry written by appendEntryValues. The
// payload aliases the reply's string: it must not be modified.
func decodeEntry(id string, values map[string]any) (uint64, Entry, error) {
	ms, seqText, ok := strings.Cut(id, "-")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if !ok || ms != "0" || err != nil || seq == 0 {
		return 0, Entry{}, fmt.Errorf("%w: id %q, want 0-<seq>", errCorrupt, id)
	}
	field := func(name string) (string, bool) {
		v, ok := values[name].(string)
		return v, ok
	}
	k, ok := field(fieldKind)
	if !ok || len(k) != 1 || k[0] < '0'+byte(KindData) || k[0] > '0'+byte(KindEnd) {
		return 0, Entry{}, fmt.Errorf("%w %s: kind %q", errCorrupt, id, k)
	}
	e := Entry{Kind: Kind(k[0] - '0')}
	v, ok := field(fieldValue)
	if e.Value, err = strconv.ParseInt(v, 10, 64); !ok || err != nil {
		return 0, Entry{}, fmt.Errorf("%w %s: value %q", errCorrupt, id, v)
	}
	p, ok := field(fieldPayload)
	if ok != (e.Kind == KindData) {
		return 0, Entry{}, fmt.Errorf("%w %s: %s entry with payload field %t", errCorrupt, id, e.Kind, ok)
	}
	if len(p) > 0 {
		// go-redis built the string from a buffer of its own; share it.
		e.Payload = unsafe.Slice(unsafe.StringData(p), len(p))
	}
	return seq, e, nil
}
