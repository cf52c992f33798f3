package deploy

import (
	"fmt"
	"net"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/secretbox"
)

// The files every test reads, by slash path from the repo root.
const (
	dockerfilePath = "Dockerfile"
	composePath    = "deploy/compose.yaml"
	systemdDir     = "deploy/systemd"
	// envFileInstalled is the EnvironmentFile the units read; the example is
	// what the test reads in its place.
	envFileInstalled = "/etc/homing/homing.env"
	envFileExample   = "deploy/systemd/homing.env.example"
)

// workload is one process a deployment file starts: a compose service, a
// Kubernetes container or a systemd unit, with the argv it runs and the
// HOMING_* environment it gets.
type workload struct {
	where string // for messages: "deploy/compose.yaml: service worker"
	argv  []string
	env   []string // "K=V"
}

// role is what the workload runs: the homing subcommand ("worker",
// "migrate", ...) or the name of a standalone binary.
func (w workload) role() string {
	if len(w.argv) == 0 {
		return ""
	}
	bin := path.Base(w.argv[0])
	if bin != "homing" {
		return bin
	}
	for _, a := range w.argv[1:] {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// config is the configuration the workload would run with, secrets.key
// placeholders replaced by a real key as an operator would.
func (w workload) config(t *testing.T) config.Config {
	t.Helper()
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	env := slices.Clone(w.env)
	for i, kv := range env {
		if strings.HasPrefix(kv, config.EnvName("secrets.key")+"=") {
			env[i] = config.EnvName("secrets.key") + "=" + key
		}
	}
	cfg, err := config.LoadFrom("", env)
	if err != nil {
		t.Fatalf("%s: its HOMING_* environment does not load: %v", w.where, err)
	}
	return cfg
}

// dockerImage is what the Dockerfile says about the image it builds.
type dockerImage struct {
	instructions []instruction
	entrypoint   []string
	cmd          []string
}

func readDockerfile(t *testing.T) dockerImage {
	t.Helper()
	d := dockerImage{instructions: parseDockerfile(t, readFile(t, dockerfilePath))}
	for _, in := range d.finalStage(t) {
		switch in.cmd {
		case "ENTRYPOINT":
			ep, ok := execForm(in.args)
			if !ok {
				t.Fatalf("Dockerfile:%d: ENTRYPOINT must be exec form ([\"homing\"]) so that SIGTERM reaches homing, not a shell", in.line)
			}
			d.entrypoint, d.cmd = ep, nil // a later ENTRYPOINT resets CMD
		case "CMD":
			c, ok := execForm(in.args)
			if !ok {
				t.Fatalf("Dockerfile:%d: CMD must be exec form", in.line)
			}
			d.cmd = c
		}
	}
	return d
}

// finalStage is the instructions from the last FROM on.
func (d dockerImage) finalStage(t *testing.T) []instruction {
	t.Helper()
	last := -1
	for i, in := range d.instructions {
		if in.cmd == "FROM" {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	return d.instructions[last:]
}

// imageRepo is an image reference without its tag or digest.
func imageRepo(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return strings.TrimPrefix(strings.TrimPrefix(ref, "docker.io/"), "library/")
}

// imageTag is an image reference's tag ("" when none).
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return ""
}

// composeFile is deploy/compose.yaml with each service's workload resolved.
type composeFile struct {
	doc      yamlDoc
	services map[string]map[string]any
	// homingImage is the image the services that build the repo's
	// Dockerfile are tagged with.
	homingImage string
}

func readCompose(t *testing.T, docs []yamlDoc) composeFile {
	t.Helper()
	var found []yamlDoc
	for _, d := range docs {
		if d.file == composePath {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one YAML document, got %d", composePath, len(found))
	}
	c := composeFile{doc: found[0], services: map[string]map[string]any{}}
	for name, s := range getMap(c.doc.v, "services") {
		svc, ok := s.(map[string]any)
		if !ok {
			t.Fatalf("%s: service %s is not a mapping", composePath, name)
		}
		c.services[name] = svc
		if get(svc, "build") == nil {
			continue
		}
		img := getString(svc, "image")
		if img == "" {
			t.Fatalf("%s: service %s builds the Dockerfile but names no image", composePath, name)
		}
		if c.homingImage != "" && imageRepo(c.homingImage) != imageRepo(img) {
			t.Errorf("%s: services build the Dockerfile into two images, %s and %s", composePath, c.homingImage, img)
		}
		c.homingImage = img
	}
	if len(c.services) == 0 {
		t.Fatalf("%s: no services", composePath)
	}
	if c.homingImage == "" {
		t.Fatalf("%s: no service builds the repo's Dockerfile", composePath)
	}
	return c
}

// serviceByImage is the one service running an image of repository repo.
func (c composeFile) serviceByImage(t *testing.T, repo string) (string, map[string]any) {
	t.Helper()
	var names []string
	for name, svc := range c.services {
		if imageRepo(getString(svc, "image")) == repo {
			names = append(names, name)
		}
	}
	if len(names) != 1 {
		t.Fatalf("%s: want one %s service, got %v", composePath, repo, names)
	}
	return names[0], c.services[names[0]]
}

// workloads are the services running the Homing image, with compose's
// entrypoint/command semantics over the Dockerfile's ENTRYPOINT and CMD.
func (c composeFile) workloads(t *testing.T, img dockerImage) map[string]workload {
	t.Helper()
	out := map[string]workload{}
	for name, svc := range c.services {
		if imageRepo(getString(svc, "image")) != imageRepo(c.homingImage) {
			continue
		}
		argv := slices.Concat(img.entrypoint, img.cmd)
		if ep := get(svc, "entrypoint"); ep != nil {
			argv = stringList(t, ep)
		}
		if cmd := get(svc, "command"); cmd != nil {
			n := len(img.entrypoint)
			if get(svc, "entrypoint") != nil {
				n = len(stringList(t, get(svc, "entrypoint")))
			}
			argv = slices.Concat(argv[:n], stringList(t, cmd))
		}
		out[name] = workload{
			where: fmt.Sprintf("%s: service %s", composePath, name),
			argv:  argv,
			env:   envEntries(t, get(svc, "environment")),
		}
	}
	return out
}

// replicas is a compose service's deploy.replicas (1 when unset).
func replicas(svc map[string]any) int {
	if n, ok := getInt(svc, "deploy", "replicas"); ok {
		return n
	}
	return 1
}

// publishedPort is one entry of a compose service's ports: the host address
// it is bound to ("" for every interface) and the container port.
type publishedPort struct {
	hostIP string
	target int
}

// publishedPorts reads a compose service's ports, in the short syntax
// ("[IP:][HOST:]CONTAINER[/PROTO]", IPv6 in brackets) or the long one
// (target, host_ip). Port ranges fail the test: no file here uses them.
func publishedPorts(t *testing.T, name string, svc map[string]any) []publishedPort {
	t.Helper()
	var out []publishedPort
	for i, p := range getList(svc, "ports") {
		if m, ok := p.(map[string]any); ok {
			n, ok := getInt(m, "target")
			if !ok {
				t.Fatalf("%s: service %s: ports[%d] has no numeric target", composePath, name, i)
			}
			out = append(out, publishedPort{hostIP: getString(m, "host_ip"), target: n})
			continue
		}
		spec, _, _ := strings.Cut(fmt.Sprint(p), "/")
		host, target := "", spec
		if j := strings.LastIndex(spec, ":"); j >= 0 {
			host, target = spec[:j], spec[j+1:]
		}
		ip := ""
		if j := strings.LastIndex(host, ":"); j >= 0 {
			ip = strings.Trim(host[:j], "[]")
		}
		n, err := strconv.Atoi(target)
		if err != nil {
			t.Fatalf("%s: service %s: ports[%d] %q: container port %q is not a number", composePath, name, i, p, target)
		}
		out = append(out, publishedPort{hostIP: ip, target: n})
	}
	return out
}

// k8sObject is one Kubernetes object under deploy/k8s/.
type k8sObject struct {
	doc  yamlDoc
	kind string
	name string
}

func (o k8sObject) String() string { return fmt.Sprintf("%s %s/%s", o.doc, o.kind, o.name) }

func k8sObjects(t *testing.T, docs []yamlDoc) []k8sObject {
	t.Helper()
	var out []k8sObject
	for _, d := range docs {
		if !strings.HasPrefix(d.file, "deploy/k8s/") {
			continue
		}
		o := k8sObject{doc: d, kind: getString(d.v, "kind"), name: getString(d.v, "metadata", "name")}
		if getString(d.v, "apiVersion") == "" || o.kind == "" || o.name == "" {
			t.Fatalf("%s: not a Kubernetes object (apiVersion, kind and metadata.name are required)", d)
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		t.Fatal("no Kubernetes objects under deploy/k8s/")
	}
	return out
}

func findObject(objs []k8sObject, kind, name string) (k8sObject, bool) {
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			return o, true
		}
	}
	return k8sObject{}, false
}

// podSpec is the pod template of a workload object, nil for other kinds.
func (o k8sObject) podSpec() map[string]any {
	switch o.kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		return getMap(o.doc.v, "spec", "template", "spec")
	case "CronJob":
		return getMap(o.doc.v, "spec", "jobTemplate", "spec", "template", "spec")
	}
	return nil
}

// k8sWorkload is one container of a workload object.
type k8sWorkload struct {
	workload
	obj       k8sObject
	container map[string]any
}

// k8sWorkloads resolves every container's argv (Kubernetes' command/args
// semantics over the image's ENTRYPOINT/CMD) and environment (envFrom the
// ConfigMaps and Secrets defined beside it, then env).
func k8sWorkloads(t *testing.T, objs []k8sObject, img dockerImage) []k8sWorkload {
	t.Helper()
	var out []k8sWorkload
	for _, o := range objs {
		spec := o.podSpec()
		if spec == nil {
			continue
		}
		for _, list := range []string{"initContainers", "containers"} {
			for i := range getList(spec, list) {
				c := getMap(spec, list, strconv.Itoa(i))
				w := k8sWorkload{obj: o, container: c}
				w.where = fmt.Sprintf("%s container %s", o, getString(c, "name"))
				command, args := get(c, "command"), get(c, "args")
				switch {
				case command != nil:
					w.argv = slices.Concat(stringList(t, command), stringList(t, args))
				case args != nil:
					w.argv = slices.Concat(img.entrypoint, stringList(t, args))
				default:
					w.argv = slices.Concat(img.entrypoint, img.cmd)
				}
				for j := range getList(c, "envFrom") {
					for ref, kind := range map[string]string{"configMapRef": "ConfigMap", "secretRef": "Secret"} {
						name := getString(c, "envFrom", strconv.Itoa(j), ref, "name")
						if name == "" {
							continue
						}
						src, ok := findObject(objs, kind, name)
						if !ok {
							t.Errorf("%s: envFrom %s %q is not defined under deploy/k8s/", w.where, kind, name)
							continue
						}
						for _, field := range []string{"data", "stringData"} {
							w.env = append(w.env, envEntries(t, get(src.doc.v, field))...)
						}
					}
				}
				for j := range getList(c, "env") {
					e := getMap(c, "env", strconv.Itoa(j))
					if get(e, "valueFrom") == nil {
						w.env = append(w.env, getString(e, "name")+"="+getString(e, "value"))
					}
				}
				out = append(out, w)
			}
		}
	}
	return out
}

// containerPort resolves a probe's or a Service's port (a number or the name
// of one of the container's ports).
func containerPort(c map[string]any, port any) int {
	switch p := port.(type) {
	case int:
		return p
	case string:
		if n, err := strconv.Atoi(p); err == nil {
			return n
		}
		for i := range getList(c, "ports") {
			if getString(c, "ports", strconv.Itoa(i), "name") == p {
				n, _ := getInt(c, "ports", strconv.Itoa(i), "containerPort")
				return n
			}
		}
	}
	return 0
}

// servicesFor are the Services that select w's pods and send one of their
// ports to the container's port.
func servicesFor(objs []k8sObject, w k8sWorkload, port int) []k8sObject {
	labels := getMap(w.obj.doc.v, "spec", "template", "metadata", "labels")
	var out []k8sObject
	for _, o := range objs {
		if o.kind != "Service" || !selects(getMap(o.doc.v, "spec", "selector"), labels) {
			continue
		}
		for i := range getList(o.doc.v, "spec", "ports") {
			p := getMap(o.doc.v, "spec", "ports", strconv.Itoa(i))
			target := get(p, "targetPort")
			if target == nil {
				target = get(p, "port")
			}
			if containerPort(w.container, target) == port {
				out = append(out, o)
				break
			}
		}
	}
	return out
}

// addrPort is the port of a listen address like ":9464".
func addrPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen address %q: port is not a number", addr)
	}
	return n
}

// systemdUnit is one unit file under deploy/systemd/.
type systemdUnit struct {
	workload
	file string
	unit unit
}

func systemdUnits(t *testing.T) []systemdUnit {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(repoRoot(t), systemdDir, "*.service"))
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) == 0 {
		t.Fatalf("no *.service files in %s", systemdDir)
	}
	var out []systemdUnit
	for _, m := range matches {
		rel := systemdDir + "/" + filepath.Base(m)
		u := systemdUnit{file: rel, unit: parseUnit(t, rel)}
		u.where = rel
		start := u.unit["Service"]["ExecStart"]
		if len(start) != 1 {
			t.Fatalf("%s: want one ExecStart=, got %d", rel, len(start))
		}
		argv, err := shellWords(strings.TrimLeft(start[0], "-@:+!"))
		if err != nil {
			t.Fatalf("%s: ExecStart: %v", rel, err)
		}
		u.argv = argv
		// Later entries win, and systemd lets EnvironmentFile= override
		// Environment= wherever each appears: Environment= goes first.
		for _, e := range u.unit["Service"]["Environment"] {
			words, err := shellWords(e)
			if err != nil {
				t.Fatalf("%s: Environment=%s: %v", rel, e, err)
			}
			u.env = append(u.env, words...)
		}
		for _, ef := range u.unit["Service"]["EnvironmentFile"] {
			if ef == envFileInstalled {
				u.env = append(u.env, envFile(t, envFileExample)...)
			}
		}
		out = append(out, u)
	}
	return out
}
