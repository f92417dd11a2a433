package exchange

import (
	"strings"
	"testing"
)

func TestChannelKeys(t *testing.T) {
	for _, tc := range []struct {
		ch             Channel
		stream, credit string
	}{
		{
			Channel{Job: "wordcount", Attempt: 3, Edge: "tokenize", Producer: 2, ConsumerVertex: "count", Consumer: 1},
			"weir:{wordcount:3:count:1}:ch:tokenize:2",
			"weir:{wordcount:3:count:1}:cr:tokenize:2",
		},
		{
			Channel{Job: "a:b{c}", Attempt: 0, Edge: "x*y?", Producer: 0, ConsumerVertex: "%v ü", Consumer: 0},
			"weir:{a%3Ab%7Bc%7D:0:%25v%20%C3%BC:0}:ch:x%2Ay%3F:0",
			"weir:{a%3Ab%7Bc%7D:0:%25v%20%C3%BC:0}:cr:x%2Ay%3F:0",
		},
	} {
		stream, credit := channelKeys("weir:", tc.ch)
		if stream != tc.stream || credit != tc.credit {
			t.Errorf("keys of %s = %s, %s; want %s, %s", tc.ch, stream, credit, tc.stream, tc.credit)
		}
	}
}

// TestKeysShareHashTag: every key of one consumer subtask hashes by the
// same tag, whatever the names.
func TestKeysShareHashTag(t *testing.T) {
	tag := func(key string) string {
		_, rest, _ := strings.Cut(key, "{")
		tag, _, _ := strings.Cut(rest, "}")
		return tag
	}
	base := Channel{Job: "j{}", Attempt: 1, ConsumerVertex: "v}{", Consumer: 2}
	var tags []string
	for _, edge := range []string{"a", "}", "{b}", ":"} {
		for p := range 3 {
			ch := base
			ch.Edge, ch.Producer = edge, p
			s, c := channelKeys("weir:", ch)
			tags = append(tags, tag(s), tag(c))
		}
	}
	for _, tg := range tags {
		if tg != tags[0] {
			t.Fatalf("tags differ: %q and %q", tags[0], tg)
		}
	}
}

func TestAttemptPattern(t *testing.T) {
	if got, want := attemptPattern("weir:", "a*b", 2), "weir:{a%2Ab:2:*"; got != want {
		t.Errorf("pattern = %s, want %s", got, want)
	}
	if got, want := attemptPattern("weir:", "job", -1), "weir:{job:*"; got != want {
		t.Errorf("pattern = %s, want %s", got, want)
	}
}

func TestEscapeNameInjective(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"a:b", "a%3Ab", "a%b", "a%25b", "", "%", "%25", "a b", "a+b"} {
		e := escapeName(s)
		if prev, ok := seen[e]; ok {
			t.Errorf("%q and %q both escape to %q", prev, s, e)
		}
		seen[e] = s
	}
}

func TestEntryRoundTrip(t *testing.T) {
	for _, e := range []Entry{
		{Kind: KindData, Payload: []byte("hello")},
		{Kind: KindData},
		{Kind: KindWatermark, Value: -5},
		{Kind: KindBarrier, Value: 1 << 62},
		{Kind: KindEnd},
	} {
		vals := appendEntryValues(nil, e)
		m := map[string]any{}
		for i := 0; i < len(vals); i += 2 {
			switch v := vals[i+1].(type) {
			case string:
				m[vals[i].(string)] = v
			case []byte:
				m[vals[i].(string)] = string(v)
			}
		}
		seq, got, err := decodeEntry(entryID(42), m)
		if err != nil || seq != 42 || got.Kind != e.Kind || got.Value != e.Value || string(got.Payload) != string(e.Payload) {
			t.Errorf("round trip of %+v = %d, %+v, %v", e, seq, got, err)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add("0-1", "1", "0", "payload", true)
	f.Add("0-2", "2", "17", "", false)
	f.Add("1-1", "9", "x", "", true)
	f.Fuzz(func(t *testing.T, id, kind, value, payload string, hasPayload bool) {
		m := map[string]any{fieldKind: kind, fieldValue: value}
		if hasPayload {
			m[fieldPayload] = payload
		}
		seq, e, err := decodeEntry(id, m)
		if err != nil {
			return
		}
		if seq == 0 || e.Kind < KindData || e.Kind > KindEnd {
			t.Fatalf("decoded seq %d kind %d without error", seq, e.Kind)
		}
		if (e.Kind == KindData) != hasPayload || string(e.Payload) != payload && e.Kind == KindData {
			t.Fatalf("decoded %+v from payload %q (present %t)", e, payload, hasPayload)
		}
		// A decoded entry encodes back to the same fields.
		vals := appendEntryValues(nil, e)
		if vals[1] != kind {
			t.Fatalf("kind %q re-encoded as %q", kind, vals[1])
		}
	})
}
