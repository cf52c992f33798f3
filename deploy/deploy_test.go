package deploy

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestEnvNamesExist: every HOMING_* variable named in the deploy files, the
// Dockerfile or the operations guide is one Homing reads.
func TestEnvNamesExist(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, k := range configKeys() {
		known[config.EnvName(k)] = true
	}
	files := []string{dockerfilePath, "docs/operations.md"}
	root := repoRoot(t)
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`HOMING_[A-Z0-9_]*[A-Z0-9]`)
	seen := 0
	for _, f := range files {
		for n, line := range strings.Split(readFile(t, f), "\n") {
			for _, v := range name.FindAllString(line, -1) {
				seen++
				if !known[v] {
					t.Errorf("%s:%d: %s is not the variable of any config key", f, n+1, v)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no HOMING_* variable found in the deploy files: is the scan looking in the right place?")
	}
}

// TestEnvironmentsLoad: the environment of every workload is a valid
// configuration, and the long-running processes leave migrating to
// `homing migrate`.
func TestEnvironmentsLoad(t *testing.T) {
	t.Parallel()
	img := readDockerfile(t)
	docs := deployYAML(t)
	var all []workload
	for _, w := range readCompose(t, docs).workloads(t, img) {
		all = append(all, w)
	}
	for _, w := range k8sWorkloads(t, k8sObjects(t, docs), img) {
		all = append(all, w.workload)
	}
	for _, u := range systemdUnits(t) {
		all = append(all, u.workload)
	}
	for _, w := range all {
		cfg := w.config(t)
		if w.role() != "migrate" && w.role() != "" && cfg.Database.AutoMigrate {
			t.Errorf("%s: %s runs with database.auto_migrate true; set %s=false, migrate runs first", w.where, w.role(), config.EnvName("database.auto_migrate"))
		}
		if strings.HasPrefix(cfg.Database.URL, "sqlite://") && w.role() != "" {
			t.Errorf("%s: database.url is the embedded SQLite default; set %s", w.where, config.EnvName("database.url"))
		}
	}
}

// TestCommandsExist builds the commands once and runs every argv the
// deployment files use with --help: an unknown subcommand or flag fails.
func TestCommandsExist(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	img := readDockerfile(t)
	docs := deployYAML(t)
	all := []workload{{where: "Dockerfile ENTRYPOINT + CMD", argv: slices.Concat(img.entrypoint, img.cmd)}}
	for _, w := range readCompose(t, docs).workloads(t, img) {
		all = append(all, w)
	}
	for _, w := range k8sWorkloads(t, k8sObjects(t, docs), img) {
		all = append(all, w.workload)
	}
	for _, u := range systemdUnits(t) {
		if !path.IsAbs(u.argv[0]) {
			t.Errorf("%s: ExecStart must name the binary by absolute path, got %q", u.file, u.argv[0])
		}
		all = append(all, u.workload)
	}

	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	commands := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() {
			commands[e.Name()] = true
		}
	}
	bin, _, err := testenv.Binaries(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}

	byArgv := map[string][]string{} // argv → where it is used
	argvs := map[string][]string{}
	for _, w := range all {
		if len(w.argv) == 0 {
			t.Errorf("%s: runs nothing", w.where)
			continue
		}
		if !commands[path.Base(w.argv[0])] {
			t.Errorf("%s: runs %q, which is none of the commands in cmd/ (%v)", w.where, w.argv[0], sortedKeys(commands))
			continue
		}
		key := strings.Join(w.argv, " ")
		byArgv[key] = append(byArgv[key], w.where)
		argvs[key] = w.argv
	}
	for _, key := range sortedKeys(byArgv) {
		argv := argvs[key]
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, path.Base(argv[0])), append(slices.Clone(argv[1:]), "--help")...)
			// --help must not need configuration: run it with none.
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			cmd.Dir = t.TempDir()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s --help: %v (used by %s)\n%s", key, err, strings.Join(byArgv[key], "; "), out)
			}
		})
	}
}

// configKeys is every key Homing reads.
func configKeys() []string { return config.Config{}.Keys() }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestCompose checks the compose file's Redis settings, start order,
// process counts, grace periods and the API's published port.
func TestCompose(t *testing.T) {
	t.Parallel()
	c := readCompose(t, deployYAML(t))
	ws := c.workloads(t, readDockerfile(t))

	redisName, redis := c.serviceByImage(t, "redis")
	t.Run("redis", func(t *testing.T) {
		ref := getString(redis, "image")
		if major, ok := majorVersion(imageTag(ref)); !ok || major < 7 {
			t.Errorf("service %s: image %q: want a pinned Redis 7 or later (asynq needs >= 6.2)", redisName, ref)
		}
		flags := map[string]string{}
		words := stringList(t, get(redis, "command"))
		for i, w := range words {
			if strings.HasPrefix(w, "--") && i+1 < len(words) {
				flags[w] = words[i+1]
			}
		}
		for flag, want := range map[string]string{
			"--appendonly":       "yes",
			"--appendfsync":      "everysec",
			"--maxmemory-policy": "noeviction",
		} {
			if got := flags[flag]; got != want {
				t.Errorf("service %s: command %v: want %s %s, got %q", redisName, words, flag, want, got)
			}
		}
		if get(redis, "healthcheck", "test") == nil {
			t.Errorf("service %s: no healthcheck: dependants cannot wait for it", redisName)
		}
	})

	pgName, pg := c.serviceByImage(t, "postgres")
	t.Run("postgres", func(t *testing.T) {
		if !strings.Contains(fmt.Sprint(get(pg, "healthcheck", "test")), "pg_isready") {
			t.Errorf("service %s: want a pg_isready healthcheck, got %v", pgName, get(pg, "healthcheck", "test"))
		}
		named := false
		for _, v := range stringList(t, get(pg, "volumes")) {
			src, dst, _ := strings.Cut(v, ":")
			if _, ok := getMap(c.doc.v, "volumes")[src]; ok && strings.HasPrefix(dst, "/var/lib/postgresql") {
				named = true
			}
		}
		if !named {
			t.Errorf("service %s: the data directory must be on a named volume declared under volumes:", pgName)
		}
	})

	byRole := map[string][]string{}
	for _, name := range sortedKeys(ws) {
		byRole[ws[name].role()] = append(byRole[ws[name].role()], name)
	}
	if len(byRole["migrate"]) != 1 {
		t.Fatalf("want one service running homing migrate, got %v", byRole["migrate"])
	}
	migrate := byRole["migrate"][0]
	t.Run("start order", func(t *testing.T) {
		for _, dep := range []string{redisName, pgName} {
			if got := getString(c.services[migrate], "depends_on", dep, "condition"); got != "service_healthy" {
				t.Errorf("service %s: depends_on %s: want condition service_healthy, got %q", migrate, dep, got)
			}
		}
		for _, role := range []string{"worker", "scheduler", "serve"} {
			for _, name := range byRole[role] {
				if got := getString(c.services[name], "depends_on", migrate, "condition"); got != "service_completed_successfully" {
					t.Errorf("service %s: depends_on %s: want condition service_completed_successfully, got %q", name, migrate, got)
				}
			}
		}
		if r := getString(c.services[migrate], "restart"); r != "no" && r != "" {
			t.Errorf("service %s: restart %q: a one-shot must not be restarted", migrate, r)
		}
	})
	// Workers, schedulers and serve drain for worker.shutdown_timeout after
	// SIGTERM; Docker's SIGKILL must come later.
	checkGrace := func(t *testing.T, name string) {
		t.Helper()
		grace, err := time.ParseDuration(getString(c.services[name], "stop_grace_period"))
		if shutdown := ws[name].config(t).Worker.ShutdownTimeout; err != nil || grace <= shutdown {
			t.Errorf("service %s: stop_grace_period %q must be a duration above worker.shutdown_timeout (%s)", name, getString(c.services[name], "stop_grace_period"), shutdown)
		}
	}
	for _, role := range []string{"worker", "scheduler"} {
		t.Run(role+"s", func(t *testing.T) {
			n := 0
			for _, name := range byRole[role] {
				n += replicas(c.services[name])
				checkGrace(t, name)
			}
			if n < 2 {
				t.Errorf("want at least two %s processes, got %d (services %v)", role, n, byRole[role])
			}
		})
	}
	t.Run("api", func(t *testing.T) {
		if len(byRole["serve"]) == 0 {
			t.Fatal("no service runs homing serve")
		}
		for _, name := range byRole["serve"] {
			checkGrace(t, name)
			checkReachable(t, "service "+name, "api.addr", ws[name].config(t).API.Addr)
			port := addrPort(t, ws[name].config(t).API.Addr)
			published := false
			for _, p := range publishedPorts(t, name, c.services[name]) {
				published = published || p.target == port
				if ip := net.ParseIP(p.hostIP); ip == nil || !ip.IsLoopback() {
					t.Errorf("service %s: port %d is published on %q: the API is plain HTTP carrying bearer tokens; publish it on 127.0.0.1 behind a TLS-terminating proxy", name, p.target, p.hostIP)
				}
			}
			if !published {
				t.Errorf("service %s: publishes no port to api.addr's %d (ports %v)", name, port, get(c.services[name], "ports"))
			}
		}
	})
	if len(byRole["monitor"]) == 0 {
		t.Error("no service runs homing monitor")
	}
}

// checkReachable fails a container's listen address on loopback: the
// default (127.0.0.1) is the container's own loopback, which neither a
// published port nor a probe or a scraper reaches, so a container whose
// port is published or probed must name 0.0.0.0 explicitly.
func checkReachable(t *testing.T, where, key, addr string) {
	t.Helper()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: %s %q: %v", where, key, addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Errorf("%s: %s %q is the container's own loopback, which its published port, probes and scrapers cannot reach: set it to 0.0.0.0:PORT explicitly", where, key, addr)
	}
}

// majorVersion reads the leading number of an image tag like "7.4-alpine";
// ok is false for tags like "latest" that pin nothing.
func majorVersion(tag string) (int, bool) {
	m := regexp.MustCompile(`^([0-9]+)`).FindStringSubmatch(tag)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// TestImagesAgree: compose and every Kubernetes container run the one
// image the Dockerfile builds.
func TestImagesAgree(t *testing.T) {
	t.Parallel()
	docs := deployYAML(t)
	c := readCompose(t, docs)
	want := imageRepo(c.homingImage)
	for name, svc := range c.services {
		repo := imageRepo(getString(svc, "image"))
		if repo != want && repo != "redis" && repo != "postgres" {
			t.Errorf("%s: service %s runs %s; Homing services run %s", composePath, name, getString(svc, "image"), want)
		}
	}
	n := 0
	for _, w := range k8sWorkloads(t, k8sObjects(t, docs), readDockerfile(t)) {
		n++
		if got := getString(w.container, "image"); imageRepo(got) != want {
			t.Errorf("%s: image %q, want %s (as in %s)", w.where, got, want, composePath)
		}
	}
	if n == 0 {
		t.Error("no containers under deploy/k8s/")
	}
}

// TestKubernetes checks the worker's and the API's shutdown and probes, and
// that every object the issue asks for is there and wired together.
func TestKubernetes(t *testing.T) {
	t.Parallel()
	docs := deployYAML(t)
	objs := k8sObjects(t, docs)
	byRole := map[string][]k8sWorkload{}
	for _, w := range k8sWorkloads(t, objs, readDockerfile(t)) {
		byRole[w.role()] = append(byRole[w.role()], w)
	}
	wantKind := map[string]string{"worker": "Deployment", "scheduler": "Deployment", "migrate": "Job", "monitor": "Deployment", "serve": "Deployment"}
	for _, role := range sortedKeys(wantKind) {
		if len(byRole[role]) != 1 || byRole[role][0].obj.kind != wantKind[role] {
			t.Errorf("want one %s running %s, got %d", wantKind[role], role, len(byRole[role]))
		}
	}
	if t.Failed() {
		return
	}

	worker := byRole["worker"][0]
	t.Run("worker", func(t *testing.T) {
		cfg := worker.config(t)
		checkK8sGrace(t, worker, cfg)
		checkReachable(t, worker.where, "metrics.addr", cfg.Metrics.Addr)
		metrics := addrPort(t, cfg.Metrics.Addr)
		checkK8sProbes(t, worker, "metrics.addr", metrics)
		ann := getMap(worker.obj.doc.v, "spec", "template", "metadata", "annotations")
		if getString(ann, "prometheus.io/scrape") != "true" || getString(ann, "prometheus.io/port") != strconv.Itoa(metrics) {
			t.Errorf("%s: want pod annotations prometheus.io/scrape \"true\" and prometheus.io/port %q, got %v", worker.obj, strconv.Itoa(metrics), ann)
		}
	})

	t.Run("scheduler", func(t *testing.T) {
		if n, ok := getInt(byRole["scheduler"][0].obj.doc.v, "spec", "replicas"); ok && n < 1 {
			t.Errorf("%s: replicas %d", byRole["scheduler"][0].obj, n)
		}
	})

	t.Run("api", func(t *testing.T) {
		api := byRole["serve"][0]
		cfg := api.config(t)
		checkK8sGrace(t, api, cfg)
		checkReachable(t, api.where, "api.addr", cfg.API.Addr)
		port := addrPort(t, cfg.API.Addr)
		checkK8sProbes(t, api, "api.addr", port)
		svcs := servicesFor(objs, api, port)
		if len(svcs) == 0 {
			t.Errorf("no Service selects %s on api.addr's port %d", api.obj, port)
		}
		for _, svc := range svcs {
			if typ := getString(svc.doc.v, "spec", "type"); typ != "" && typ != "ClusterIP" {
				t.Errorf("%s: type %s: the API is plain HTTP; keep its Service ClusterIP and expose it through an Ingress that terminates TLS", svc, typ)
			}
		}
	})

	t.Run("monitor service", func(t *testing.T) {
		mon := byRole["monitor"][0]
		listen := ""
		for i, a := range mon.argv {
			if a == "--addr" && i+1 < len(mon.argv) {
				listen = mon.argv[i+1]
			} else if v, ok := strings.CutPrefix(a, "--addr="); ok {
				listen = v
			}
		}
		if listen == "" {
			t.Fatalf("%s: pass --addr so the Service's port is explicit", mon.where)
		}
		port := addrPort(t, listen)
		if len(servicesFor(objs, mon, port)) == 0 {
			t.Errorf("no Service selects %s on its port %d", mon.obj, port)
		}
	})

	t.Run("hpa", func(t *testing.T) {
		for _, o := range objs {
			if o.kind == "HorizontalPodAutoscaler" &&
				getString(o.doc.v, "spec", "scaleTargetRef", "kind") == worker.obj.kind &&
				getString(o.doc.v, "spec", "scaleTargetRef", "name") == worker.obj.name {
				return
			}
		}
		t.Errorf("no HorizontalPodAutoscaler targets %s", worker.obj)
	})

	t.Run("secret", func(t *testing.T) {
		var secrets []k8sObject
		for _, o := range objs {
			if o.kind == "Secret" {
				secrets = append(secrets, o)
			}
		}
		if len(secrets) != 1 {
			t.Fatalf("want one Secret, got %d", len(secrets))
		}
		data := getMap(secrets[0].doc.v, "stringData")
		for _, k := range []string{"secrets.key", "database.url"} {
			if _, ok := data[config.EnvName(k)]; !ok {
				t.Errorf("%s: stringData has no %s", secrets[0], config.EnvName(k))
			}
		}
		// A placeholder that worked would be a key everybody knows.
		if _, err := secretbox.New(getString(data, config.EnvName("secrets.key"))); err == nil {
			t.Errorf("%s: the %s placeholder is a usable key; make it one that fails at start until replaced", secrets[0], config.EnvName("secrets.key"))
		}
		for _, o := range objs {
			if o.kind == "ConfigMap" {
				if _, ok := getMap(o.doc.v, "data")[config.EnvName("secrets.key")]; ok {
					t.Errorf("%s: %s belongs in the Secret", o, config.EnvName("secrets.key"))
				}
			}
		}
	})
}

// checkK8sGrace: w's pods get longer than worker.shutdown_timeout between
// SIGTERM and SIGKILL, the time the worker gives attempts and serve gives
// requests in flight. The grace period also covers a preStop sleep, which
// comes before the SIGTERM.
func checkK8sGrace(t *testing.T, w k8sWorkload, cfg config.Config) {
	t.Helper()
	grace, ok := getInt(w.obj.podSpec(), "terminationGracePeriodSeconds")
	if !ok {
		grace = 30 // Kubernetes' default
	}
	pause, _ := getInt(w.container, "lifecycle", "preStop", "sleep", "seconds")
	if time.Duration(grace-pause)*time.Second <= cfg.Worker.ShutdownTimeout {
		t.Errorf("%s: terminationGracePeriodSeconds %d must exceed the preStop sleep (%ds) plus worker.shutdown_timeout %s, or the kubelet SIGKILLs work in flight", w.obj, grace, pause, cfg.Worker.ShutdownTimeout)
	}
}

// checkK8sProbes: readiness on /readyz and liveness on /healthz, both on
// port, the port of the listen address key that serves them.
func checkK8sProbes(t *testing.T, w k8sWorkload, key string, port int) {
	t.Helper()
	for _, probe := range []struct{ name, path string }{{"readinessProbe", "/readyz"}, {"livenessProbe", "/healthz"}} {
		p := getMap(w.container, probe.name, "httpGet")
		if got := getString(p, "path"); got != probe.path {
			t.Errorf("%s: %s path %q, want %s", w.where, probe.name, got, probe.path)
		}
		if got := containerPort(w.container, get(p, "port")); got != port {
			t.Errorf("%s: %s port %v is %d, want %s's %d", w.where, probe.name, get(p, "port"), got, key, port)
		}
	}
}

// selects reports whether a Service selector matches pod labels.
func selects(selector, labels map[string]any) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if fmt.Sprint(labels[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// TestSystemd checks the worker, scheduler and serve units' order, restart,
// stop and hardening settings.
func TestSystemd(t *testing.T) {
	t.Parallel()
	byRole := map[string]systemdUnit{}
	for _, u := range systemdUnits(t) {
		byRole[u.role()] = u
	}
	migrate, ok := byRole["migrate"]
	if !ok {
		t.Fatalf("no unit in %s runs homing migrate", systemdDir)
	}
	for _, role := range []string{"worker", "scheduler", "serve"} {
		u, ok := byRole[role]
		if !ok {
			t.Errorf("no unit in %s runs homing %s", systemdDir, role)
			continue
		}
		t.Run(role, func(t *testing.T) {
			svc := func(key string) string { return u.unit.last("Service", key) }
			for key, want := range map[string]string{
				"Restart":         "on-failure",
				"KillSignal":      "SIGTERM",
				"EnvironmentFile": envFileInstalled,
				"NoNewPrivileges": "yes",
				"ProtectSystem":   "strict",
			} {
				if got := svc(key); got != want {
					t.Errorf("%s: %s=%q, want %q", u.file, key, got, want)
				}
			}
			if user := svc("User"); user == "" || user == "root" || user == "0" {
				if svc("DynamicUser") != "yes" {
					t.Errorf("%s: User=%q: run as a dedicated unprivileged user", u.file, user)
				}
			}
			stop, err := systemdSpan(svc("TimeoutStopSec"))
			if shutdown := u.config(t).Worker.ShutdownTimeout; err != nil || stop <= shutdown {
				t.Errorf("%s: TimeoutStopSec=%q must be above worker.shutdown_timeout %s (%v)", u.file, svc("TimeoutStopSec"), shutdown, err)
			}
			var after []string
			for _, a := range u.unit["Unit"]["After"] {
				after = append(after, strings.Fields(a)...)
			}
			if !slices.Contains(after, path.Base(migrate.file)) {
				t.Errorf("%s: After=%v: want %s there, so that started together the migrations finish first", u.file, after, path.Base(migrate.file))
			}
			if u.unit.last("Install", "WantedBy") == "" {
				t.Errorf("%s: no [Install] WantedBy=: systemctl enable would do nothing", u.file)
			}
		})
	}
}

// TestDockerfile checks the image's run-time settings and that its build is
// the Makefile's release build.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	img := readDockerfile(t)
	final := img.finalStage(t)

	user, stopsignal := "", ""
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "STOPSIGNAL":
			stopsignal = in.args
		}
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		t.Errorf("Dockerfile: final stage USER %q: run as a non-root user", user)
	}
	if stopsignal != "SIGTERM" {
		t.Errorf("Dockerfile: STOPSIGNAL %q, want SIGTERM", stopsignal)
	}
	if !slices.Equal(img.entrypoint, []string{"homing"}) {
		t.Errorf("Dockerfile: ENTRYPOINT %q, want [\"homing\"] so one image serves every command", img.entrypoint)
	}

	recipe := releaseCommand(t)
	var build []string
	buildLine := 0
	for _, in := range img.instructions {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		if build != nil {
			t.Fatalf("Dockerfile:%d: a second go build", in.line)
		}
		words, err := shellWords(in.args)
		if err != nil {
			t.Fatalf("Dockerfile:%d: %v", in.line, err)
		}
		// RUN's own flags and the cross-compilation target are not part of
		// the build command.
		for len(words) > 0 && strings.HasPrefix(words[0], "--") {
			words = words[1:]
		}
		for len(words) > 0 && (strings.HasPrefix(words[0], "GOOS=") || strings.HasPrefix(words[0], "GOARCH=")) {
			words = words[1:]
		}
		build, buildLine = words, in.line
	}
	if build == nil {
		t.Fatal("Dockerfile: no RUN ... go build")
	}
	out, rest := splitOutput(build)
	wantOut, wantRest := splitOutput(recipe)
	if !slices.Equal(rest, wantRest) {
		t.Errorf("Dockerfile:%d: builds with\n\t%s\nbut make release with\n\t%s\n(output directories aside)", buildLine, strings.Join(rest, " "), strings.Join(wantRest, " "))
	}
	if out == "" || wantOut == "" {
		t.Errorf("both builds must name their output directory with -o (Dockerfile %q, Makefile %q)", out, wantOut)
	}
	copied := false
	for _, in := range final {
		words, _ := shellWords(in.args)
		if in.cmd == "COPY" && len(words) >= 3 && strings.HasPrefix(words[0], "--from=") &&
			path.Clean(words[1]) == path.Clean(out) && path.Clean(words[2]) == "/usr/local/bin" {
			copied = true
		}
	}
	if !copied {
		t.Errorf("Dockerfile: the final stage must COPY --from=<builder> %s /usr/local/bin/", out)
	}

	// The builder's Go is the one go.mod asks for.
	from, _ := shellWords(img.instructions[0].args)
	builder := ""
	for _, w := range from {
		if !strings.HasPrefix(w, "--") {
			builder = w
			break
		}
	}
	goVersion := regexp.MustCompile(`(?m)^go ([0-9]+\.[0-9]+)`).FindStringSubmatch(readFile(t, "go.mod"))
	if imageRepo(builder) != "golang" || goVersion == nil || !strings.HasPrefix(imageTag(builder), goVersion[1]) {
		t.Errorf("Dockerfile: builder %q, want golang:%s (go.mod's go directive)", builder, goVersion)
	}
}

// releaseCommand is the go build line of the Makefile's release target.
func releaseCommand(t *testing.T) []string {
	t.Helper()
	for _, line := range makeRecipe(t, readFile(t, "Makefile"), "release") {
		if strings.Contains(line, "go build") {
			words, err := shellWords(line)
			if err != nil {
				t.Fatalf("Makefile release: %v", err)
			}
			if strings.Contains(line, "$(") {
				t.Fatalf("Makefile release: %q uses make variables, which this test does not expand", line)
			}
			return words
		}
	}
	t.Fatal("Makefile: the release recipe runs no go build")
	return nil
}

// splitOutput takes "-o DIR" out of a go build command.
func splitOutput(words []string) (out string, rest []string) {
	for i := 0; i < len(words); i++ {
		if words[i] == "-o" && i+1 < len(words) {
			out = words[i+1]
			i++
			continue
		}
		rest = append(rest, words[i])
	}
	return out, rest
}

// TestDockerignoreKeepsSources: the build context holds every file the
// release build reads.
func TestDockerignoreKeepsSources(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var patterns []*regexp.Regexp
	var exceptions []*regexp.Regexp
	for _, line := range strings.Split(readFile(t, ".dockerignore"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if p, ok := strings.CutPrefix(line, "!"); ok {
			exceptions = append(exceptions, ignorePattern(p))
		} else {
			patterns = append(patterns, ignorePattern(line))
		}
	}
	ignored := func(rel string) bool {
		for _, e := range exceptions {
			if e.MatchString(rel) {
				return false
			}
		}
		for _, p := range patterns {
			if p.MatchString(rel) {
				return true
			}
		}
		return false
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	list := exec.CommandContext(ctx, "go", "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$.Dir}}/{{.}}
{{end}}{{end}}`, "./cmd/...")
	list.Dir = root
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list ./cmd/...: %v", err)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		needed = append(needed, filepath.ToSlash(rel))
	}
	if len(needed) < 10 {
		t.Fatalf("go list found only %v", needed)
	}
	for _, rel := range needed {
		if ignored(rel) {
			t.Errorf(".dockerignore excludes %s, which the build needs", rel)
		}
	}
}

// ignorePattern compiles a .dockerignore line: a path (relative to the
// context root) whose match also excludes everything under it; * and ?
// stay within a path element, ** spans any number of them.
func ignorePattern(p string) *regexp.Regexp {
	p = strings.Trim(path.Clean("/"+p), "/")
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			re.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			re.WriteString(".*")
			i++
		case p[i] == '*':
			re.WriteString("[^/]*")
		case p[i] == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	re.WriteString("(?:/.*)?$")
	return regexp.MustCompile(re.String())
}
