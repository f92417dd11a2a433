package connectors

import (
	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connectors/blackhole"
	"github.com/weirstream/weir/functions/connectors/datagen"
	"github.com/weirstream/weir/functions/connectors/files"
	"github.com/weirstream/weir/functions/connectors/nexmark"
	"github.com/weirstream/weir/functions/connectors/redis"
	"github.com/weirstream/weir/functions/connectors/stdout"
)

// The built-in connectors, in the order error messages list them.
func init() {
	for _, t := range []connector.SourceType{datagen.SourceType(), files.SourceType(), redis.SourceType(), nexmark.SourceType()} {
		connector.RegisterSource(t)
	}
	for _, t := range []connector.SinkType{files.SinkType(), redis.SinkType(), stdout.SinkType(), blackhole.SinkType()} {
		connector.RegisterSink(t)
	}
}
