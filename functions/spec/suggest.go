package spec

// Suggest returns the name in names closest to got (case-insensitive,
// within two edits), or "" when none is close: the "did you mean" of the
// job spec's problems, for other configuration (the CLI's config file)
// to report the same way.
func Suggest(got string, names []string) string { return suggest(got, names) }
