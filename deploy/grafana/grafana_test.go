package grafana_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The part of Grafana's dashboard model (schemaVersion 39, Grafana 10+)
// weir.json uses. Decoding refuses any other field, so a misspelt key,
// which Grafana would silently ignore, fails here.
type dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	Description   string     `json:"description"`
	Tags          []string   `json:"tags"`
	Editable      bool       `json:"editable"`
	GraphTooltip  int        `json:"graphTooltip"`
	Refresh       string     `json:"refresh"`
	SchemaVersion int        `json:"schemaVersion"`
	Version       int        `json:"version"`
	Time          timeRange  `json:"time"`
	Timezone      string     `json:"timezone"`
	Annotations   list[any]  `json:"annotations"`
	Links         []any      `json:"links"`
	Templating    list[tvar] `json:"templating"`
	Panels        []panel    `json:"panels"`
}

type list[T any] struct {
	List []T `json:"list"`
}

type timeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type tvar struct {
	Name       string          `json:"name"`
	Label      string          `json:"label"`
	Type       string          `json:"type"`
	Datasource *datasource     `json:"datasource"`
	Query      json.RawMessage `json:"query"` // a string for a datasource variable, an object for a query one
	Definition string          `json:"definition"`
	Refresh    int             `json:"refresh"`
	IncludeAll bool            `json:"includeAll"`
	Multi      bool            `json:"multi"`
	AllValue   string          `json:"allValue"`
	Sort       int             `json:"sort"`
	Hide       int             `json:"hide"`
	Current    json.RawMessage `json:"current"`
}

type panel struct {
	ID          int             `json:"id"`
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Datasource  *datasource     `json:"datasource"`
	GridPos     gridPos         `json:"gridPos"`
	FieldConfig json.RawMessage `json:"fieldConfig"`
	Options     json.RawMessage `json:"options"`
	Targets     []target        `json:"targets"`
	Collapsed   bool            `json:"collapsed"`
	Panels      []panel         `json:"panels"` // a row's, when collapsed
}

type gridPos struct{ H, W, X, Y int }

type target struct {
	RefID        string      `json:"refId"`
	Datasource   *datasource `json:"datasource"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
}

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile("weir.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	d := new(dashboard)
	if err := dec.Decode(d); err != nil {
		t.Fatalf("decode weir.json: %v", err)
	}
	if dec.More() {
		t.Fatal("weir.json: data after the dashboard object")
	}
	return d
}

// exported returns the names of the families weir exports, from the
// Describe of every collector that a /metrics serves: the coordinator's
// (jobs, vertices, checkpoints, Wasm functions) and a worker's (slots and
// the task families of control.DescribeTasks).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 256)
	coordinator.DescribeMetrics(ch)
	(*worker.Worker)(nil).Collector().Describe(ch) // Describe reads no worker
	control.DescribeTasks(ch)
	close(ch)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no fqName in %s", d)
		}
		names[m[1]] = true
	}
	if len(names) < 20 {
		t.Fatalf("only %d families described: %v", len(names), names)
	}
	return names
}

// isCounter tells a counter by its name: weir's counters, and only they,
// end in _total (STYLE.md; TestCounterNames checks it where the type can
// be observed).
func isCounter(name string) bool { return strings.HasSuffix(name, "_total") }

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	metricName = regexp.MustCompile(`\bweir_[a-zA-Z0-9_:]*`)
	rangeFunc  = regexp.MustCompile(`\b(rate|irate|increase)\(`)
)

// metricNames returns the weir_ metric names a PromQL expression reads;
// label values (quoted) are left out.
func metricNames(expr string) []string {
	return metricName.FindAllString(quoted.ReplaceAllString(expr, `""`), -1)
}

// rangeArgs returns the argument of every rate(), irate() and increase()
// in expr, by matching its parenthesis.
func rangeArgs(expr string) ([]string, error) {
	expr = quoted.ReplaceAllString(expr, `""`)
	var args []string
	for _, loc := range rangeFunc.FindAllStringIndex(expr, -1) {
		depth, start := 1, loc[1]
		end := -1
		for i := start; i < len(expr) && end < 0; i++ {
			switch expr[i] {
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					end = i
				}
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("unbalanced %s", expr[loc[0]:loc[1]])
		}
		args = append(args, expr[start:end])
	}
	return args, nil
}

// query is one PromQL expression of the dashboard and where it is.
type query struct{ where, expr string }

func queries(d *dashboard) []query {
	var qs []query
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err == nil {
				qs = append(qs, query{"variable " + v.Name, q.Query})
			}
		}
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				qs = append(qs, query{fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID), tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return qs
}

// TestDashboardMetricsExist checks that every family the dashboard
// queries is one weir exports, and that only counters are
// given to rate(), irate() and increase().
func TestDashboardMetricsExist(t *testing.T) {
	d := loadDashboard(t)
	have := exported(t)
	used := map[string]bool{}
	for _, q := range queries(d) {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s: no weir_ metric in %q", q.where, q.expr)
		}
		for _, n := range names {
			used[n] = true
			if !have[n] {
				t.Errorf("%s: %s is not a family weir exports (expr %q)", q.where, n, q.expr)
			}
		}
		args, err := rangeArgs(q.expr)
		if err != nil {
			t.Errorf("%s: %v in %q", q.where, err, q.expr)
		}
		for _, a := range args {
			inner := metricNames(a)
			if len(inner) == 0 {
				t.Errorf("%s: rate() over no weir_ metric: %q", q.where, a)
			}
			for _, n := range inner {
				if !isCounter(n) {
					t.Errorf("%s: rate() of %s, a gauge: only counters (_total) have a rate (expr %q)", q.where, n, q.expr)
				}
			}
		}
	}
	// The families have their panels: the exchange per channel,
	// state bytes, source backlog.
	for _, name := range []string{"weir_task_channel_entries_total", "weir_task_channel_bytes_total", "weir_task_channel_credit_waits_total",
		"weir_task_channel_credit_wait_seconds_total", "weir_task_state_bytes", "weir_task_source_backlog_records", "weir_task_source_backlog_bytes",
		"weir_task_busy_seconds_total", "weir_task_backpressured_seconds_total"} {
		if !used[name] {
			t.Errorf("no panel queries %s", name)
		}
	}
}

// TestCounterNames checks the naming rule isCounter relies on against
// the types of the task families a worker exports: a counter's name ends
// in _total, and a gauge's does not.
func TestCounterNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(taskCollector{})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) == 0 {
		t.Fatal("no task families gathered")
	}
	for _, f := range families {
		counter := f.GetType().String() == "COUNTER"
		if counter != isCounter(f.GetName()) {
			t.Errorf("%s is a %s: counters, and only counters, end in _total", f.GetName(), f.GetType())
		}
	}
}

// taskCollector exports two tasks' families, so that every one appears:
// a source with a backlog in records and an output channel, and one with
// a backlog in bytes.
type taskCollector struct{}

func (taskCollector) Describe(ch chan<- *prometheus.Desc) { control.DescribeTasks(ch) }
func (taskCollector) Collect(ch chan<- prometheus.Metric) {
	control.CollectTask(ch, control.TaskID{Job: "j", Vertex: "v"}, control.Stats{Watermark: 1000, Backlog: 5, BacklogUnit: "records",
		Channels: []control.ChannelStats{{ToVertex: "w", ToSubtask: 0, Entries: 3}}})
	control.CollectTask(ch, control.TaskID{Job: "j", Vertex: "f"}, control.Stats{Backlog: 5, BacklogUnit: "bytes"})
}

// TestDashboardShape checks what Grafana needs to lay out and query the
// panels: unique ids, a grid 24 wide, every query on the ${datasource}
// variable, and the job variable the brief of issue 13 asks for.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want a uid, a title and schemaVersion >= 36 (Grafana 10)", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]tvar{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || string(v.Query) != `"prometheus"` {
		t.Errorf("want a datasource variable of Prometheus data sources, have %+v", v)
	}
	if v := vars["job"]; v.Definition != "label_values(weir_task_records_in_total, job)" {
		t.Errorf("job variable: definition %q, want label_values(weir_task_records_in_total, job)", v.Definition)
	}
	ids := map[int]bool{}
	ds := func(where string, d *datasource) {
		if d == nil || d.Type != "prometheus" || d.UID != "${datasource}" {
			t.Errorf("%s: datasource %+v, want prometheus ${datasource}", where, d)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			ds("variable "+v.Name, v.Datasource)
		}
	}
	for _, p := range d.Panels {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if ids[p.ID] {
			t.Errorf("%s: duplicate id", where)
		}
		ids[p.ID] = true
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24-column grid", where, g)
		}
		if p.Type == "row" {
			continue
		}
		if !slices.Contains([]string{"timeseries", "stat"}, p.Type) {
			t.Errorf("%s: type %q", where, p.Type)
		}
		ds(where, p.Datasource)
		if len(p.Targets) == 0 {
			t.Errorf("%s: no targets", where)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			ds(where+" target "+tg.RefID, tg.Datasource)
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: refId %q empty or repeated", where, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}
}
