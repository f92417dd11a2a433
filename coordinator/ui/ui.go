// Package ui is weir's web console, served by the coordinator at /: plain
// HTML, CSS and one JavaScript module embedded in the binary (no bundler,
// no build step). It is a client of the JSON API (/api/v1/...), like the
// CLI, and redraws itself every second.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the console: / is the single page, /ui/ its assets.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, sub, "index.html")
	})
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", files))
	return mux
}
