package connector_test

// These tests build the built-in connectors through the registry.
import _ "github.com/weirstream/weir/functions/connectors"
