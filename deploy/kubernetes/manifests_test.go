package kubernetes_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/weirstream/weir/cli"
	"github.com/weirstream/weir/coordinator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scaledObject is the part of KEDA's ScaledObject (keda.sh/v1alpha1, KEDA
// 2.x) these manifests use; decoding refuses any other field.
type scaledObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
		MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
		Fallback        *struct {
			FailureThreshold int32 `json:"failureThreshold"`
			Replicas         int32 `json:"replicas"`
		} `json:"fallback,omitempty"`
		Advanced *struct {
			HorizontalPodAutoscalerConfig *struct {
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type       string            `json:"type"`
			Name       string            `json:"name,omitempty"`
			MetricType string            `json:"metricType,omitempty"`
			Metadata   map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// objects are the decoded documents of the manifests, by kind and name.
type objects struct {
	namespaces  map[string]*corev1.Namespace
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	services    map[string]*corev1.Service
	deployments map[string]*appsv1.Deployment
	scaled      map[string]*scaledObject
}

// readManifests reads every *.yaml file of dir.
func readManifests(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	files := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = b
	}
	return files
}

// decode splits every file into its documents and decodes each strictly
// into the type of its apiVersion and kind.
func decode(files map[string][]byte) (*objects, []error) {
	o := &objects{namespaces: map[string]*corev1.Namespace{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, services: map[string]*corev1.Service{},
		deployments: map[string]*appsv1.Deployment{}, scaled: map[string]*scaledObject{}}
	var errs []error
	for _, file := range slices.Sorted(func(yield func(string) bool) {
		for f := range files {
			if !yield(f) {
				return
			}
		}
	}) {
		r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(files[file])))
		for doc := 1; ; doc++ {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			where := fmt.Sprintf("%s: document %d", file, doc)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				break
			}
			js, err := yaml.YAMLToJSON(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			if string(bytes.TrimSpace(js)) == "null" {
				continue // only comments
			}
			var tm metav1.TypeMeta
			if err := json.Unmarshal(js, &tm); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			where += fmt.Sprintf(" (%s %s)", tm.APIVersion, tm.Kind)
			var v any
			var name func() string
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 Namespace":
				x := &corev1.Namespace{}
				v, name = x, func() string { o.namespaces[x.Name] = x; return x.Name }
			case "v1 ConfigMap":
				x := &corev1.ConfigMap{}
				v, name = x, func() string { o.configMaps[x.Name] = x; return x.Name }
			case "v1 Secret":
				x := &corev1.Secret{}
				v, name = x, func() string { o.secrets[x.Name] = x; return x.Name }
			case "v1 Service":
				x := &corev1.Service{}
				v, name = x, func() string { o.services[x.Name] = x; return x.Name }
			case "apps/v1 Deployment":
				x := &appsv1.Deployment{}
				v, name = x, func() string { o.deployments[x.Name] = x; return x.Name }
			case "keda.sh/v1alpha1 ScaledObject":
				x := &scaledObject{}
				v, name = x, func() string { o.scaled[x.Metadata.Name] = x; return x.Metadata.Name }
			default:
				errs = append(errs, fmt.Errorf("%s: no test decodes this kind; add it to decode", where))
				continue
			}
			// As the API server's strict field validation: unknown and
			// duplicate fields, and fields in the wrong case, are errors.
			strict, err := kjson.UnmarshalStrict(js, v, kjson.DisallowUnknownFields)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			for _, e := range strict {
				errs = append(errs, fmt.Errorf("%s: %w", where, e))
			}
			if n := name(); n == "" {
				errs = append(errs, fmt.Errorf("%s: no metadata.name", where))
			}
		}
	}
	return o, errs
}

// check decodes the manifests and checks what holds them together.
func check(t *testing.T, files map[string][]byte) []error {
	t.Helper()
	o, errs := decode(files)
	if len(errs) > 0 {
		return errs
	}
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	weirEnv := weirEnvNames(t)
	namespaces := map[string]bool{}
	for n := range o.namespaces {
		namespaces[n] = true
	}
	inNamespace := func(what string, m metav1.ObjectMeta) {
		if !namespaces[m.Namespace] {
			bad("%s %s: namespace %q is not one of the manifests' namespaces %v", what, m.Name, m.Namespace, slices.Sorted(mapKeys(namespaces)))
		}
	}
	for _, cm := range o.configMaps {
		inNamespace("ConfigMap", cm.ObjectMeta)
		for key, content := range cm.Data {
			if strings.HasSuffix(key, ".yaml") {
				errs = append(errs, checkConfig(t, cm.Name, key, content)...)
			}
		}
	}
	for _, s := range o.secrets {
		inNamespace("Secret", s.ObjectMeta)
	}
	for _, d := range o.deployments {
		inNamespace("Deployment", d.ObjectMeta)
		where := "Deployment " + d.Name
		sel, err := metav1.LabelSelectorAsMap(d.Spec.Selector)
		if err != nil || len(sel) == 0 || !matches(sel, d.Spec.Template.Labels) {
			bad("%s: selector %v does not match the pod labels %v (%v)", where, sel, d.Spec.Template.Labels, err)
		}
		pod := d.Spec.Template.Spec
		volumes := map[string]corev1.Volume{}
		for _, v := range pod.Volumes {
			volumes[v.Name] = v
			if v.ConfigMap != nil && o.configMaps[v.ConfigMap.Name] == nil {
				bad("%s: volume %s: no ConfigMap %q", where, v.Name, v.ConfigMap.Name)
			}
		}
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			errs = append(errs, checkContainer(o, where+": container "+c.Name, c, volumes, weirEnv)...)
		}
	}
	for _, s := range o.services {
		inNamespace("Service", s.ObjectMeta)
		found := false
		for _, d := range o.deployments {
			if d.Namespace != s.Namespace || !matches(s.Spec.Selector, d.Spec.Template.Labels) {
				continue
			}
			found = true
			for _, p := range s.Spec.Ports {
				if p.TargetPort.StrVal != "" && !hasPort(d.Spec.Template.Spec.Containers, p.TargetPort.StrVal) {
					bad("Service %s: port %s: targetPort %q is no container port of Deployment %s", s.Name, p.Name, p.TargetPort.StrVal, d.Name)
				}
			}
		}
		if !found {
			bad("Service %s: selector %v matches no Deployment's pods", s.Name, s.Spec.Selector)
		}
	}
	for _, so := range o.scaled {
		errs = append(errs, checkScaledObject(o, so)...)
	}
	return errs
}

// checkContainer checks a container's weir command line, environment,
// probes and mounts.
func checkContainer(o *objects, where string, c corev1.Container, volumes map[string]corev1.Volume, weirEnv []string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(where+": "+format, args...)) }
	line := slices.Concat(c.Command, c.Args)
	if len(c.Command) == 0 || filepath.Base(c.Command[0]) != "weir" {
		bad("command %q: want weir (the image's entrypoint is not assumed)", c.Command)
	} else if err := cli.CheckCommand(line[1:]); err != nil {
		bad("%w", err)
	}
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
		if strings.HasPrefix(e.Name, "WEIR_") && !slices.Contains(weirEnv, e.Name) {
			bad("env %s: weir reads no such variable; it reads %s", e.Name, strings.Join(weirEnv, ", "))
		}
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
			s := o.secrets[r.SecretKeyRef.Name]
			optional := r.SecretKeyRef.Optional != nil && *r.SecretKeyRef.Optional
			switch {
			case s == nil:
				bad("env %s: no Secret %q", e.Name, r.SecretKeyRef.Name)
			case !optional && s.StringData[r.SecretKeyRef.Key] == "" && len(s.Data[r.SecretKeyRef.Key]) == 0:
				bad("env %s: Secret %s has no key %q", e.Name, s.Name, r.SecretKeyRef.Key)
			}
		}
	}
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		n, err := goMemLimit(e.Value)
		limit := c.Resources.Limits.Memory()
		switch {
		case err != nil:
			bad("env GOMEMLIMIT: %v", err)
		case limit.IsZero():
			bad("env GOMEMLIMIT %s: the container has no limits.memory to keep it below", e.Value)
		case n >= limit.Value():
			bad("env GOMEMLIMIT %s is not below limits.memory %s: the Go heap would reach the container's limit", e.Value, limit)
		}
	}
	// Kubernetes expands $(VAR) in command and args from the container's
	// env, and leaves an undefined one as it is.
	for _, arg := range line {
		for _, m := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(arg, -1) {
			if !env[m[1]] {
				bad("arg %q: $(%s) is not in the container's env", arg, m[1])
			}
		}
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			continue
		}
		port := p.probe.HTTPGet.Port
		if port.StrVal != "" && !hasPort([]corev1.Container{c}, port.StrVal) {
			bad("%s: port %q is not one of the container's ports", p.name, port.StrVal)
		}
	}
	for _, m := range c.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok {
			bad("volumeMount %s: no such volume", m.Name)
		}
	}
	return errs
}

// goMemLimit parses GOMEMLIMIT as the Go runtime does: a whole number of
// bytes with an optional unit B, KiB, MiB, GiB or TiB.
func goMemLimit(s string) (int64, error) {
	num, unit := s, ""
	if i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		num, unit = s[:i], s[i:]
	}
	shift, ok := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || num == "" {
		return 0, fmt.Errorf("%q: want bytes with an optional B, KiB, MiB, GiB or TiB (Go's syntax)", s)
	}
	return n << shift, nil
}

// checkConfig has weir read a ConfigMap's config file: an unknown key is
// an error, as when a weir process starts with it.
func checkConfig(t *testing.T, cm, key, content string) []error {
	t.Helper()
	path := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Execute([]string{"version", "--config", path}, &stdout, &stderr); code != 0 {
		return []error{fmt.Errorf("ConfigMap %s: %s: weir refuses it: %s", cm, key, strings.TrimSpace(stderr.String()))}
	}
	return nil
}

func checkScaledObject(o *objects, so *scaledObject) []error {
	var errs []error
	where := "ScaledObject " + so.Metadata.Name
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(where+": "+format, args...)) }
	target := o.deployments[so.Spec.ScaleTargetRef.Name]
	if target == nil || target.Namespace != so.Metadata.Namespace {
		bad("scaleTargetRef %q is no Deployment in namespace %s", so.Spec.ScaleTargetRef.Name, so.Metadata.Namespace)
		return errs
	}
	if target.Spec.Replicas != nil {
		bad("Deployment %s sets replicas: re-applying it would fight the autoscaler", target.Name)
	}
	if len(so.Spec.Triggers) == 0 {
		bad("no triggers")
	}
	for i, tr := range so.Spec.Triggers {
		tw := fmt.Sprintf("triggers[%d]", i)
		if tr.Type != "metrics-api" {
			bad("%s: type %q: this test knows metrics-api only", tw, tr.Type)
			continue
		}
		md := tr.Metadata
		known := []string{"url", "format", "valueLocation", "targetValue", "activationTargetValue", "authMode", "unsafeSsl"}
		for k := range md {
			if !slices.Contains(known, k) {
				bad("%s: metadata %q: unknown to the metrics-api trigger (known: %s)", tw, k, strings.Join(known, ", "))
			}
		}
		// The value is a field of GET /api/v1/cluster.
		b, _ := json.Marshal(coordinator.ClusterStatus{})
		var fields map[string]any
		_ = json.Unmarshal(b, &fields)
		if _, ok := fields[md["valueLocation"]]; !ok {
			bad("%s: valueLocation %q is not a field of GET /api/v1/cluster (%v)", tw, md["valueLocation"], slices.Sorted(mapKeys(fields)))
		}
		// The URL is the coordinator Service's.
		u, err := url.Parse(md["url"])
		if err != nil {
			bad("%s: url: %v", tw, err)
			continue
		}
		if u.Path != "/api/v1/cluster" {
			bad("%s: url %s: want path /api/v1/cluster", tw, u)
		}
		svcName, ns, _ := strings.Cut(u.Hostname(), ".")
		ns, _, _ = strings.Cut(ns, ".")
		svc := o.services[svcName]
		if svc == nil || svc.Namespace != ns || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == u.Port() }) {
			bad("%s: url %s: want a Service's name.namespace and port (KEDA runs in its own namespace)", tw, u)
		}
		// Averaged over the workers, the target is a worker's slots.
		if tr.MetricType != "" && tr.MetricType != "AverageValue" {
			bad("%s: metricType %q: want AverageValue (slots per worker)", tw, tr.MetricType)
		}
		slots := flagValue(target.Spec.Template.Spec.Containers, "--slots")
		if md["targetValue"] != slots {
			bad("%s: targetValue %q, but the workers of %s run --slots=%s", tw, md["targetValue"], target.Name, slots)
		}
	}
	return errs
}

// weirEnvNames are the WEIR_* variables weir reads: those of its
// configuration keys, and those its cli package reads itself.
func weirEnvNames(t *testing.T) []string {
	t.Helper()
	names := cli.ConfigEnv()
	srcs, err := filepath.Glob("../../cli/*.go")
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no cli sources: %v", err)
	}
	getenv := regexp.MustCompile(`os\.Getenv\("(WEIR_[A-Z0-9_]+)"\)`)
	for _, f := range srcs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range getenv.FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// flagValue is the value of --name=value or --name value in the first
// container's args that has it.
func flagValue(cs []corev1.Container, name string) string {
	for _, c := range cs {
		args := slices.Concat(c.Command, c.Args)
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
		}
	}
	return ""
}

func hasPort(cs []corev1.Container, name string) bool {
	for _, c := range cs {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestManifests(t *testing.T) {
	files := readManifests(t, ".")
	for _, err := range check(t, files) {
		t.Error(err)
	}
	o, _ := decode(files)
	for kind, n := range map[string]int{"Namespace": len(o.namespaces), "ConfigMap": len(o.configMaps), "Secret": len(o.secrets),
		"Service": len(o.services), "Deployment": len(o.deployments), "ScaledObject": len(o.scaled)} {
		if n == 0 {
			t.Errorf("no %s among the manifests", kind)
		}
	}
	if d := o.deployments["weir-coordinator"]; d == nil || d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("the coordinator Deployment should run a leader and a standby: %+v", d)
	}
}

// TestManifestsCheckCatches breaks the manifests in ways a reader would
// miss and kubectl might not say, and wants the check to say so.
func TestManifestsCheckCatches(t *testing.T) {
	files := readManifests(t, ".")
	for _, tc := range []struct {
		file, old, new, want string
	}{
		{"worker.yaml", "--slots=4", "--slotz=4", "unknown flag: --slotz"},
		{"coordinator.yaml", "--lease-ttl=10s", "--lease-ttl=10", `invalid argument "10" for "--lease-ttl"`},
		{"coordinator.yaml", "- coordinator\n", "- coordinatr\n", `unknown command "coordinatr"`},
		{"worker.yaml", "name: WEIR_REDIS_PASSWORD", "name: WEIR_REDIS_PASSWD", "env WEIR_REDIS_PASSWD: weir reads no such variable"},
		{"worker.yaml", "      terminationGracePeriodSeconds: 30\n", "      terminationGracePeriod: 30\n", `unknown field "spec.template.spec.terminationGracePeriod"`},
		{"coordinator.yaml", "httpGet: {path: /healthz, port: http}", "httpGet: {path: /healthz, port: http, Scheme: HTTP}", `unknown field "spec.template.spec.containers[0].readinessProbe.httpGet.Scheme"`},
		{"config.yaml", "    log-level: info\n", "    log-levl: info\n", `unknown key "log-levl" (did you mean "log-level"?)`},
		{"keda.yaml", "valueLocation: slotsWanted", "valueLocation: slotWanted", `valueLocation "slotWanted" is not a field`},
		{"keda.yaml", "targetValue: \"4\"", "targetValue: \"8\"", `targetValue "8", but the workers of weir-worker run --slots=4`},
		{"keda.yaml", "  pollingInterval: 10\n", "  pollingIntervall: 10\n", `unknown field "spec.pollingIntervall"`},
		{"keda.yaml", "weir-coordinator.weir.svc", "weir-coordinator.default.svc", "want a Service's name.namespace and port"},
		{"coordinator.yaml", "--advertise=http://$(POD_IP):8081", "--advertise=http://$(POD_ADDR):8081", "$(POD_ADDR) is not in the container's env"},
		{"coordinator.yaml", "targetPort: http", "targetPort: api", `targetPort "api" is no container port`},
		{"worker.yaml", "value: 3GiB", "value: 4GiB", "env GOMEMLIMIT 4GiB is not below limits.memory 4Gi"},
		{"worker.yaml", "value: 3GiB", "value: 3GB", `env GOMEMLIMIT: "3GB": want bytes`},
	} {
		t.Run(tc.file+" "+tc.new, func(t *testing.T) {
			broken := map[string][]byte{}
			for f, b := range files {
				broken[f] = b
			}
			if !bytes.Contains(files[tc.file], []byte(tc.old)) {
				t.Fatalf("%s has no %q to break", tc.file, tc.old)
			}
			broken[tc.file] = bytes.Replace(files[tc.file], []byte(tc.old), []byte(tc.new), 1)
			errs := check(t, broken)
			if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), tc.want) }) {
				t.Errorf("check found %v, want an error with %q", errs, tc.want)
			}
		})
	}
}
