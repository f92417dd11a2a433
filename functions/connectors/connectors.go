package connectors

import (
	"github.com/weirstream/weir/functions/builtin"
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connectors/stdout"
)

// The built-in connectors, in the order error messages list them.
func init() {
	bs := builtin.SinkTypes()
	for _, t := range []connector.SinkType{bs[0], bs[1], stdout.SinkType(), bs[2]} {
		connector.RegisterSink(t)
	}
}
