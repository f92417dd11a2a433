package coordinator

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weirstream/weir/functions/task"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
	"github.com/weirstream/weir/statestore/manifest"
)

// What the bucket holds of a job beside its checkpoints, read for the API
// (and the console) and for the CLI's --store: its savepoints and samples
// of its dead letters.

// SavepointInfo is one savepoint of a job.
type SavepointInfo struct {
	Name string `json:"name"`
	// Key is the manifest's key: what weir deploy --from-savepoint takes.
	Key        string    `json:"key"`
	Checkpoint int64     `json:"checkpoint"`
	Attempt    int       `json:"attempt"`
	Completed  time.Time `json:"completed"`
	StateBytes int64     `json:"stateBytes"`
	Files      int       `json:"files"`
	// Error is why the manifest could not be read (the other fields are
	// empty then).
	Error string `json:"error,omitempty"`
}

// ListSavepoints reads the savepoint manifests of job in b, newest first.
// A job with no savepoint and no spec in b is an error naming b.
func ListSavepoints(ctx context.Context, b blob.BucketReader, job string) ([]SavepointInfo, error) {
	objs, err := b.List(ctx, layout.SavepointsPrefix(job))
	if err != nil {
		return nil, fmt.Errorf("list the savepoints of %s in %s: %w", job, b.Describe(), err)
	}
	list := []SavepointInfo{}
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Key, layout.SavepointsPrefix(job))
		name, file, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || file != "manifest.json" {
			continue
		}
		info := SavepointInfo{Name: name, Key: o.Key}
		m, err := readManifest(ctx, b, o.Key)
		if err != nil {
			info.Error = err.Error()
			list = append(list, info)
			continue
		}
		info.Checkpoint, info.Attempt, info.Completed = m.Checkpoint, m.Attempt, m.Completed
		for _, v := range m.Vertices {
			for _, st := range v.Subtasks {
				for _, f := range st.State {
					info.StateBytes += f.Size
					info.Files++
				}
			}
		}
		list = append(list, info)
	}
	if len(list) == 0 {
		if _, err := b.Stat(ctx, layout.SpecKey(job)); err != nil {
			return nil, fmt.Errorf("no job %s in %s (%s: %v)", job, b.Describe(), layout.SpecKey(job), err)
		}
	}
	slices.SortFunc(list, func(x, y SavepointInfo) int { // newest first
		return cmp.Or(cmp.Compare(y.Checkpoint, x.Checkpoint), strings.Compare(y.Name, x.Name))
	})
	return list, nil
}

func readManifest(ctx context.Context, b blob.BucketReader, key string) (*manifest.Manifest, error) {
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	m, err := manifest.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	return m, nil
}

// DeadLetterSample is a dead letter and the object holding it.
type DeadLetterSample struct {
	task.DeadLetter
	Key string `json:"key"`
}

// maxSampleBytes bounds the raw record of a sample: a dead letter may
// hold a whole line of input.
const maxSampleBytes = 512

// DeadLetterSamples returns up to n committed dead letters of source,
// from its newest objects (by key). Staged objects, not committed yet,
// are left out, and raw records are cut to maxSampleBytes.
func DeadLetterSamples(ctx context.Context, b blob.BucketReader, job, source string, n int) ([]DeadLetterSample, error) {
	prefix := layout.DeadLetterPrefix(job, source)
	objs, err := b.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list the dead letters of %s in %s: %w", source, b.Describe(), err)
	}
	out := []DeadLetterSample{}
	for i := len(objs) - 1; i >= 0 && len(out) < n; i-- {
		key := objs[i].Key
		if strings.Contains(key, "/_staging/") || !strings.HasSuffix(key, ".jsonl") {
			continue
		}
		data, err := b.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("read dead letters %s: %w", key, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() && len(out) < n {
			var d task.DeadLetter
			if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
				return nil, fmt.Errorf("dead letters %s: %w", key, err)
			}
			if len(d.Raw) > maxSampleBytes {
				cut := maxSampleBytes
				for cut > 0 && !utf8.RuneStart(d.Raw[cut]) {
					cut--
				}
				d.Raw = d.Raw[:cut] + "…"
			}
			out = append(out, DeadLetterSample{DeadLetter: d, Key: key})
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("dead letters %s: %w", key, err)
		}
	}
	return out, nil
}

// SourceDeadLetters are a source's committed dead letters: how many, and
// samples from its newest objects.
type SourceDeadLetters struct {
	Source  string             `json:"source"`
	Count   int64              `json:"count"`
	Samples []DeadLetterSample `json:"samples"`
}

// DeadLetters returns, for each source of job id, its dead-letter count
// (over every attempt, from the job's status) and up to n samples.
func (c *Coordinator) DeadLetters(ctx context.Context, id string, n int) ([]SourceDeadLetters, error) {
	st, err := c.Status(id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	j := c.mu.jobs[id]
	var sources []string
	if j != nil {
		for _, s := range j.spec.Sources {
			sources = append(sources, s.Name)
		}
	}
	c.mu.Unlock()
	counts := map[string]int64{}
	for _, v := range st.Vertices {
		if len(v.Nodes) > 0 {
			counts[v.Nodes[0]] += v.Totals.DeadLetters
		}
	}
	out := make([]SourceDeadLetters, 0, len(sources))
	for _, s := range sources {
		samples, err := DeadLetterSamples(ctx, c.cfg.Bucket, id, s, n)
		if err != nil {
			return nil, err
		}
		out = append(out, SourceDeadLetters{Source: s, Count: counts[s], Samples: samples})
	}
	return out, nil
}
