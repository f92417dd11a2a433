package surge

import (
	"time"

	"github.com/weirstream/weir/functions"
	"github.com/weirstream/weir/functions/spec"
)

// Job returns the surge-pricing job (examples/surge-pricing.yaml) built
// with the Go builder.
func Job() (*spec.Job, error) {
	fare := func(min, max float64) spec.FieldGen { return spec.FieldGen{Min: &min, Max: &max} }
	return functions.NewJob("surge-pricing").
		Parallelism(2).
		MaxParallelism(128).
		Source(spec.Source{
			Name:   "rides",
			Type:   spec.SourceDatagen,
			Rate:   5000,
			Count:  200000,
			Schema: functions.Schema("ride_id", "int64", "zone", "string", "fare", "float64", "ts", "timestamp_ms"),
			Event: &spec.EventTime{
				Column:            "ts",
				MaxOutOfOrderness: spec.Duration(5 * time.Second),
				IdleTimeout:       spec.Duration(10 * time.Second),
			},
			Gen: &spec.DatagenOpt{
				Seed:            42,
				EventsPerSecond: 5,
				OutOfOrderness:  spec.Duration(4 * time.Second),
				Fields: map[string]spec.FieldGen{
					"zone": {Values: []string{"downtown", "airport", "harbor", "university", "stadium", "oldtown", "riverside", "hills"}},
					"fare": fare(5, 80),
				},
			},
		}).
		Operator(spec.Operator{
			Name:      "stats",
			Input:     "rides",
			KeyBy:     []string{"zone"},
			Window:    functions.Late(functions.Sliding(5*time.Minute, time.Minute), time.Minute, "late"),
			Aggregate: functions.Aggregate("requests", "count()", "avg_fare", "avg(fare)"),
		}).
		Operator(spec.Operator{
			Name:     "surge",
			Input:    "stats",
			KeyBy:    []string{"zone"},
			Function: Name,
			Config:   map[string]any{"sensitivity": 2.0},
		}).
		Sink(spec.Sink{Name: "out", Input: "surge", Type: spec.SinkFiles, Path: "output/surge/", Format: spec.FormatJSONL}).
		Sink(spec.Sink{Name: "late-out", Input: "late", Type: spec.SinkFiles, Path: "output/late/", Format: spec.FormatJSONL}).
		Build()
}
