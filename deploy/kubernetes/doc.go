// Package kubernetes holds manifests that run weir on Kubernetes (two
// coordinators, one leading; workers scaled by KEDA on the slots the jobs
// want) and the test that keeps them honest: every document decodes
// strictly into its Kubernetes API type (a misspelt field fails, where
// kubectl apply might drop it), every weir command line is one the weir
// command accepts (its real cobra commands), every WEIR_* variable is one
// weir reads, the config file has only weir's keys, and the references
// between the objects (ConfigMap, Secret, Service, probes, KEDA's target
// and URL) resolve. README.md says how to apply them.
package kubernetes
