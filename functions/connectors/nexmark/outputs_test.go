package nexmark_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/weirstream/weir/functions/connector"
	_ "github.com/weirstream/weir/functions/connectors"
	"github.com/weirstream/weir/functions/connectors/nexmark"
	"github.com/weirstream/weir/functions/spec"
)

func nexmarkSpec() *spec.Source {
	return &spec.Source{Name: "nx", Type: spec.SourceNexmark, Count: 1, Nexmark: &spec.NexmarkOpt{EventsPerSecond: 1000}}
}

// TestNexmarkOutputsAndConfig checks the outputs the registry knows of a
// nexmark source, and how its rate sets the generator's.
func TestNexmarkOutputsAndConfig(t *testing.T) {
	names, streams := connector.SourceOutputs(nexmarkSpec())
	if strings.Join(names, ",") != "person,auction,bid" || len(streams) != 3 {
		t.Fatalf("outputs %v", names)
	}
	for i, st := range streams {
		if f := st.Schema.Field(st.TimeColumn); f.Name != "dateTime" || f.Type.ID() != arrow.TIMESTAMP {
			t.Errorf("output %s: time column %v", names[i], f)
		}
	}
	if n, _ := connector.SourceOutputs(&spec.Source{Type: spec.SourceDatagen}); n != nil {
		t.Errorf("datagen has outputs %v", n)
	}
	src := nexmarkSpec()
	src.Rate, src.Nexmark.EventsPerSecond = 5000, 0
	cfg, err := nexmark.ConfigOf(src, time.Now())
	if err != nil || cfg.EventsPerSecond != 5000 {
		t.Errorf("eventsPerSecond defaults to the rate: %v %v", cfg.EventsPerSecond, err)
	}
}
