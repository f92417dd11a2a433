package cli

// The user functions compiled into this build of weir. A user adds theirs
// the same way: a blank import of a package that calls functions.Register
// in init.
import (
	_ "github.com/weirstream/weir/examples/rowcost"  // row-cost, for trying the autoscaler
	_ "github.com/weirstream/weir/examples/seqcheck" // sequence-check, used by the exactly-once tests
	_ "github.com/weirstream/weir/examples/surge"    // surge-multiplier, used by the demo
)
