// Package builtin holds weir's built-in operators: the filters, selects,
// windows, joins and function operators a job spec configures in YAML.
// Each is constructed from its spec entry and the schema of what flows
// into it, and implements an interface of package task. Sources and sinks
// are connectors (functions/connector, functions/connectors/...).
//
// # Expressions
//
// Filter and select operators take expressions in the language of
// github.com/expr-lang/expr, chosen over cel-go because it is pure Go with
// no protobuf dependency, its syntax is Go-like (fare > 20 && zone != "z-3"),
// it checks types statically against an environment at compile time, so a
// bad expression is refused when the job is deployed rather than when the
// first record arrives, and its VM is fast.
//
// Every input column is a variable of the expression, typed as expr types
// numbers: int64 columns are int, float64 columns float64, string and bool
// columns string and bool, and timestamp_ms columns are int milliseconds
// since the Unix epoch, so ts - 5000 is five seconds earlier. Column names
// that are not identifiers are reachable as $env["name"].
//
// Nulls: a row in which any column the expression reads is null has a null
// result: filter drops the row, select writes null. A row whose evaluation
// fails (an integer % 0, int("x")) counts the same as null; the operator
// logs the first such failure. Expressions cannot test for null.
//
// A batch is evaluated a column at a time when every node of the checked
// syntax tree is one of the kinds exprPlanner supports (literals, columns,
// arithmetic, comparisons, boolean logic, in, string predicates, the
// conditional, and the numeric builtins); anything else runs the compiled
// program once per row on a reused VM. Both give the same results; the
// tests compare them.
package builtin
