//go:build wasip1

// Command running-total is the README's "write your own function": per
// zone, the number of rides and the running total of their fares, one
// output row per ride. Build and deploy it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o running-total.wasm ./examples/wasm/running-total
//	weir functions deploy running-total running-total.wasm --store file://./weir-data
package main

import "github.com/weirstream/weir/functions/wasm/guest"

type runningTotal struct {
	n     *guest.ValueState[int64]
	total *guest.ValueState[float64]
}

func (r *runningTotal) Describe() guest.Description {
	return guest.Description{
		Input: []guest.Column{{Name: "zone", Type: guest.String}, {Name: "fare", Type: guest.Float64}},
		Output: []guest.Column{
			{Name: "zone", Type: guest.String},
			{Name: "rides", Type: guest.Int64},
			{Name: "total", Type: guest.Float64},
		},
		Doc: "per zone: rides so far and the running total of their fares",
	}
}

func (r *runningTotal) Open(oc *guest.OpenContext) error {
	r.n = guest.Value[int64](oc, "rides")
	r.total = guest.Value[float64](oc, "total")
	return nil
}

func (r *runningTotal) ProcessElement(ctx *guest.Context, row guest.Row, out *guest.Collector) error {
	n, _ := r.n.Value()
	total, _ := r.total.Value()
	n, total = n+1, total+row.Float64("fare")
	r.n.Update(n)
	r.total.Update(total)
	out.SetString(0, row.String("zone"))
	out.SetInt64(1, n)
	out.SetFloat64(2, total)
	return out.EndRow()
}

func init() { guest.Register(&runningTotal{}) }

func main() {}
