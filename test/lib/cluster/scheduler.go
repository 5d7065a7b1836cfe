package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"
)

// StartScheduler runs kube-scheduler with a KubeSchedulerConfiguration file shipped by the project
// (e.g. deploy/scheduler-config/lockstep-sidecar.yaml), rewriting only what differs on loopback
// (see RewriteSchedulerConfig); the result goes to WorkDir/scheduler.yaml. It returns once
// kube-scheduler's /readyz answers 200, i.e. its informers have synced and it schedules.
// extenderURL may be empty when the configuration has no extenders.
func (c *Cluster) StartScheduler(ctx context.Context, configPath, extenderURL string) error {
	return c.StartSchedulerWith(ctx, SchedulerOptions{ConfigPath: configPath, ExtenderURL: extenderURL})
}

// SchedulerOptions choose what StartSchedulerWith runs.
type SchedulerOptions struct {
	// Binary is the scheduler's file name in BinDir: KubeScheduler (the default) or another build
	// of kube-scheduler's command, such as scheduler-plugins' (plugins compiled in). Its output
	// goes to WorkDir/<Binary>.log.
	Binary string
	// ConfigPath is the KubeSchedulerConfiguration, rewritten as StartScheduler says.
	ConfigPath string
	// ExtenderURL may be empty when the configuration has no extenders.
	ExtenderURL string
	// Profiling lets anyone on loopback read /debug/pprof/ on the scheduler's secure port
	// (SchedulerURL) without credentials. Without it only /healthz, /readyz and /livez are open:
	// no --authorization-kubeconfig is given, so every other path is denied.
	Profiling bool
	// FeatureGates is --feature-gates, e.g. "GenericWorkload=true,GangScheduling=true" to run
	// Kubernetes' own gang scheduling plugin.
	FeatureGates string
}

// StartSchedulerWith is StartScheduler with a choice of binary; see SchedulerOptions.
func (c *Cluster) StartSchedulerWith(ctx context.Context, opts SchedulerOptions) error {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	if c.scheduler != nil {
		return fmt.Errorf("cluster: a scheduler is already running (pid %d)", c.scheduler.pid())
	}
	name := opts.Binary
	if name == "" {
		name = KubeScheduler
	}
	if err := checkBinaries(c.BinDir, name); err != nil {
		return err
	}
	in, err := os.ReadFile(opts.ConfigPath)
	if err != nil {
		return fmt.Errorf("cluster: reading scheduler config: %w", err)
	}
	out, err := RewriteSchedulerConfig(in, c.AdminKubeconfig, opts.ExtenderURL)
	if err != nil {
		return fmt.Errorf("cluster: %s: %w", opts.ConfigPath, err)
	}
	var extra []string
	if opts.Profiling {
		// Paths ending in * match by prefix; the first three are the flag's default.
		extra = []string{"--authorization-always-allow-paths", "/healthz,/readyz,/livez,/debug/pprof/*"}
	}
	if opts.FeatureGates != "" {
		extra = append(extra, "--feature-gates", opts.FeatureGates)
	}
	began := time.Now()
	p, port, err := c.runScheduler(ctx, schedulerRun{name: name, binary: name, files: "scheduler", config: out, extraArgs: extra})
	if err != nil {
		return err
	}
	c.scheduler = p
	c.schedulerURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	c.logf("cluster: %s ready in %s with %s", name, time.Since(began).Round(time.Millisecond), opts.ConfigPath)
	return nil
}

// schedulerRun is one kube-scheduler process to start.
type schedulerRun struct {
	// name names its log, WorkDir/<name>.log; binary is its file in BinDir.
	name, binary string
	// files names its configuration, WorkDir/<files>.yaml, and certificate dir, <files>-certs.
	files     string
	config    []byte
	hostname  string // see ReplicaOptions.Hostname
	extraArgs []string
}

// runScheduler starts a kube-scheduler serving on a free loopback port and returns once its
// /readyz answers 200, or stops it.
func (c *Cluster) runScheduler(ctx context.Context, r schedulerRun) (*process, int, error) {
	config := filepath.Join(c.WorkDir, r.files+".yaml")
	if err := os.WriteFile(config, r.config, 0o644); err != nil {
		return nil, 0, fmt.Errorf("cluster: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, 0, err
	}
	certDir := filepath.Join(c.WorkDir, r.files+"-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("cluster: %w", err)
	}
	// The notes' --secure-port 0 would leave no way to tell when the scheduler is ready; serve
	// on loopback instead and poll /readyz (always allowed without authentication).
	args := append([]string{
		"--config", config,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", certDir,
		"--v", "2",
	}, r.extraArgs...)
	p, err := startProcessUnder(r.name, filepath.Join(c.BinDir, r.binary), args, c.WorkDir, r.hostname)
	if err != nil {
		return nil, 0, err
	}
	c.logf("cluster: started %s (pid %d)", r.name, p.pid())

	// Loopback, and the certificate is one kube-scheduler generated in memory a moment ago.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	// Before 1.30 kube-scheduler serves /healthz alone (404 for /readyz), which answers once it
	// serves, its informers perhaps still listing: pods created meanwhile wait in its queue.
	probe := fmt.Sprintf("https://127.0.0.1:%d/readyz?verbose", port)
	last := "no answer yet"
	err = c.waitReady(ctx, p, SchedulerReadyTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		ok, err := probeReadyz(ctx, hc, probe, "", &last)
		if strings.HasPrefix(last, "404") && strings.Contains(probe, "/readyz") {
			probe = strings.Replace(probe, "/readyz", "/healthz", 1)
		}
		return ok, err
	}, func() string { return "last " + probe + ": " + last })
	if err != nil {
		p.stop(StopTimeout)
		return nil, 0, err
	}
	return p, port, nil
}

// SchedulerURL is the running scheduler's secure port, https://127.0.0.1:<port> (its certificate
// is self-signed), or "" when none runs.
func (c *Cluster) SchedulerURL() string {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	if c.scheduler == nil {
		return ""
	}
	return c.schedulerURL
}

// StopScheduler stops the scheduler if one runs (SIGTERM, then SIGKILL after StopTimeout);
// StartScheduler may then run it again.
func (c *Cluster) StopScheduler() {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	if c.scheduler == nil {
		return
	}
	c.scheduler.stop(StopTimeout)
	c.logf("cluster: stopped %s", c.scheduler.name)
	c.scheduler = nil
}

// RewriteSchedulerConfig parses a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1,
// strictly: unknown fields are errors) and changes only what differs on loopback:
//   - clientConnection.kubeconfig becomes kubeconfig;
//   - leaderElection.leaderElect becomes false;
//   - the host:port of every extender's urlPrefix becomes extenderURL's (scheme and path stay).
//
// Every other field keeps its value: the changes are applied to the document as written, so
// fields the file leaves unset stay unset (and get kube-scheduler's defaults) instead of coming
// back as zero values.
func RewriteSchedulerConfig(in []byte, kubeconfig, extenderURL string) ([]byte, error) {
	var cfg schedconfigv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(in, &cfg); err != nil {
		return nil, fmt.Errorf("parsing KubeSchedulerConfiguration: %w", err)
	}
	if want := schedconfigv1.SchemeGroupVersion.String(); cfg.APIVersion != want || cfg.Kind != "KubeSchedulerConfiguration" {
		return nil, fmt.Errorf("want apiVersion %s, kind KubeSchedulerConfiguration; got %q, %q", want, cfg.APIVersion, cfg.Kind)
	}
	urlPrefixes := make([]string, len(cfg.Extenders))
	if len(cfg.Extenders) > 0 {
		target, err := url.Parse(extenderURL)
		if err != nil || target.Host == "" {
			return nil, fmt.Errorf("the configuration has %d extender(s), so it needs an extender URL like http://127.0.0.1:8888; got %q",
				len(cfg.Extenders), extenderURL)
		}
		for i, e := range cfg.Extenders {
			u, err := url.Parse(e.URLPrefix)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("extender %d: urlPrefix %q is not an absolute URL", i, e.URLPrefix)
			}
			if u.Scheme != target.Scheme {
				return nil, fmt.Errorf("extender %d: urlPrefix %q uses %s, the extender URL %q uses %s",
					i, e.URLPrefix, u.Scheme, extenderURL, target.Scheme)
			}
			u.Host = target.Host
			urlPrefixes[i] = u.String()
		}
	}

	// The same document, generically, to change those fields and nothing else.
	var doc map[string]any
	if err := yaml.Unmarshal(in, &doc); err != nil {
		return nil, fmt.Errorf("parsing KubeSchedulerConfiguration: %w", err)
	}
	object := func(key string) map[string]any {
		m, ok := doc[key].(map[string]any)
		if !ok { // absent or null (the typed parse rejected anything else)
			m = map[string]any{}
			doc[key] = m
		}
		return m
	}
	object("clientConnection")["kubeconfig"] = kubeconfig
	object("leaderElection")["leaderElect"] = false
	if len(urlPrefixes) > 0 {
		extenders, _ := doc["extenders"].([]any)
		if len(extenders) != len(urlPrefixes) {
			return nil, fmt.Errorf("extenders: the typed and generic parses disagree")
		}
		for i := range extenders {
			e, ok := extenders[i].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("extender %d is not an object", i)
			}
			e["urlPrefix"] = urlPrefixes[i]
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("writing KubeSchedulerConfiguration: %w", err)
	}
	return out, nil
}
