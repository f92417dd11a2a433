// Command weir runs, deploys and manages weir stream processing jobs.
package main

import "github.com/weirstream/weir/cli"

func main() { cli.Main() }
