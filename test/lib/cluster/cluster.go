// Package cluster runs a real etcd, kube-apiserver and (optionally) kube-scheduler and
// kube-controller-manager on loopback for lockstep's end-to-end tests and its demo. No kubelet
// runs: nodes are plain API objects (see CreateNode), bound pods stay Pending with spec.nodeName
// set, and namespaces get no "default" ServiceAccount unless a test creates one.
//
// The binaries come from hack/build-control-plane.sh (`make control-plane`), which puts them in
// <repo root>/bin.
//
// TLS: kube-apiserver self-signs a serving certificate (--cert-dir) whose SANs include 127.0.0.1;
// the kubeconfigs and RESTConfig trust the CA that kube-apiserver generated alongside it, so no
// client skips TLS verification.
package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ModulePath is the module whose go.mod marks the repository root.
const ModulePath = "github.com/lockstep-sched/lockstep"

// Deadlines for the components to become ready.
const (
	EtcdReadyTimeout      = 30 * time.Second
	APIServerReadyTimeout = 90 * time.Second
	SchedulerReadyTimeout = 60 * time.Second
	// StopTimeout is how long a process gets between SIGTERM and SIGKILL.
	StopTimeout = 10 * time.Second
	// logTailLines is how much of a component's log an error carries.
	logTailLines = 30
)

// Component names; each one's output goes to WorkDir/<name>.log.
const (
	Etcd          = "etcd"
	KubeAPIServer = "kube-apiserver"
	KubeScheduler = "kube-scheduler"
)

// Options configures Start.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-scheduler. Default: DefaultBinDir, <repo root>/bin
	// unless BinDirEnv names another, the repo root being the first directory above the working
	// directory whose go.mod declares ModulePath.
	BinDir string
	// WorkDir receives data, certificates, kubeconfigs, configs and logs. Default: a new
	// os.MkdirTemp directory, removed by Stop unless KeepWorkDir. A WorkDir given by the caller is
	// never removed.
	WorkDir     string
	KeepWorkDir bool
	// Users are extra static-token users written into kube-apiserver's --token-auth-file, for
	// tests that must act as someone other than the admin. A user with an empty Token gets a
	// random one; read it back with Cluster.Token.
	Users []User
	// FeatureGates is kube-apiserver's --feature-gates and RuntimeConfig its --runtime-config,
	// e.g. "GenericWorkload=true" and "scheduling.k8s.io/v1beta1=true" to serve Kubernetes' own
	// gang API (Workload and PodGroup), beta and off by default in 1.37.
	FeatureGates, RuntimeConfig string
	// Logf receives progress lines (e.g. t.Logf); may be nil.
	Logf func(format string, args ...any)
}

// User is a static-token user of kube-apiserver.
type User struct {
	Name   string
	Token  string
	Groups []string
}

// Cluster is a running etcd + kube-apiserver (+ kube-scheduler after StartScheduler).
type Cluster struct {
	// AdminKubeconfig is the path of a kubeconfig for the admin (system:masters) user.
	AdminKubeconfig string
	RESTConfig      *rest.Config
	Client          kubernetes.Interface

	// Server is kube-apiserver's URL, https://127.0.0.1:<port>.
	Server string
	// CAData is the PEM CA that signed kube-apiserver's serving certificate.
	CAData []byte
	// EtcdURL is etcd's client URL.
	EtcdURL string
	BinDir  string
	WorkDir string
	// Release is the Kubernetes release of BinDir's binaries.
	Release Release

	logf       func(format string, args ...any)
	removeWork bool
	tokens     map[string]string // user name -> token
	etcd       *process
	apiserver  *process
	schedMu    sync.Mutex
	scheduler  *process
	// schedulerURL is the running scheduler's secure port; valid while scheduler != nil.
	schedulerURL string
	stopOnce     sync.Once
}

// Start runs etcd and kube-apiserver and returns once kube-apiserver's /readyz answers 200 and the
// default and kube-system namespaces exist. On error nothing is left running. Call Stop when done.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	began := time.Now()
	c := &Cluster{BinDir: opts.BinDir, WorkDir: opts.WorkDir, logf: opts.Logf, tokens: map[string]string{}}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if c.BinDir == "" {
		if c.BinDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	if err := checkBinaries(c.BinDir, Etcd, KubeAPIServer); err != nil {
		return nil, err
	}
	if c.Release, err = ReleaseOf(c.BinDir); err != nil {
		return nil, err
	}
	if c.WorkDir == "" {
		dir, err := os.MkdirTemp("", "lockstep-cluster-")
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		c.WorkDir = dir
		c.removeWork = !opts.KeepWorkDir
	} else if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	defer func() {
		if err != nil {
			keep := c.removeWork
			c.removeWork = false // keep the logs for a post-mortem
			c.Stop()
			if keep {
				err = fmt.Errorf("%w\n(work dir with all logs kept: %s)", err, c.WorkDir)
			}
		}
	}()

	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, opts); err != nil {
		return nil, err
	}
	c.logf("cluster: control plane ready in %s (work dir %s)", time.Since(began).Round(time.Millisecond), c.WorkDir)
	return c, nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	began := time.Now()
	clientPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	c.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	args := []string{
		"--name", "default",
		"--data-dir", filepath.Join(c.WorkDir, "etcd-data"),
		"--listen-client-urls", c.EtcdURL,
		"--advertise-client-urls", c.EtcdURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default=" + peerURL,
		// A throw-away cluster: durability buys nothing and fsync dominates on slow disks.
		"--unsafe-no-fsync",
	}
	c.etcd, err = startProcess(Etcd, filepath.Join(c.BinDir, Etcd), args, c.WorkDir)
	if err != nil {
		return err
	}
	c.logf("cluster: started etcd (pid %d) on %s", c.etcd.pid(), c.EtcdURL)

	hc := &http.Client{Timeout: 2 * time.Second}
	last := ""
	err = c.waitReady(ctx, c.etcd, EtcdReadyTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.EtcdURL+"/health", nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		var h struct {
			Health string `json:"health"`
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		return resp.StatusCode == http.StatusOK && json.Unmarshal(body, &h) == nil && h.Health == "true", nil
	}, func() string { return last })
	if err != nil {
		return err
	}
	c.logf("cluster: etcd ready in %s", time.Since(began).Round(time.Millisecond))
	return nil
}

func (c *Cluster) startAPIServer(ctx context.Context, opts Options) error {
	began := time.Now()
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.Server = "https://127.0.0.1:" + strconv.Itoa(port)
	certDir := filepath.Join(c.WorkDir, "apiserver-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	tokenFile, err := c.writeTokenFile(opts.Users)
	if err != nil {
		return err
	}
	saKey, saPub, err := writeServiceAccountKeys(c.WorkDir)
	if err != nil {
		return err
	}
	args := []string{
		"--etcd-servers", c.EtcdURL,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", certDir,
		"--token-auth-file", tokenFile,
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saPub,
		"--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.0.0.0/24",
		// No controller-manager creates ServiceAccounts, and no node-lifecycle controller
		// removes the not-ready taint TaintNodesByCondition puts on new nodes.
		"--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
	}
	if opts.FeatureGates != "" {
		args = append(args, "--feature-gates", opts.FeatureGates)
	}
	if opts.RuntimeConfig != "" {
		args = append(args, "--runtime-config", opts.RuntimeConfig)
	}
	c.apiserver, err = startProcess(KubeAPIServer, filepath.Join(c.BinDir, KubeAPIServer), args, c.WorkDir)
	if err != nil {
		return err
	}
	c.logf("cluster: started kube-apiserver (pid %d) on %s", c.apiserver.pid(), c.Server)

	// kube-apiserver writes its self-signed certificate before it serves; until then (and
	// while probing) use a transport that trusts whatever certificate that file holds.
	certFile := filepath.Join(certDir, "apiserver.crt")
	var hc *http.Client
	last := "no answer yet"
	err = c.waitReady(ctx, c.apiserver, APIServerReadyTimeout, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		if hc == nil {
			pemData, err := os.ReadFile(certFile)
			if err != nil {
				last = "waiting for " + certFile
				return false, nil
			}
			ca, err := caFromBundle(pemData)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(ca)
			c.CAData = ca
			hc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
				Proxy:           nil,
			}}
		}
		return probeReadyz(ctx, hc, c.Server+"/readyz?verbose", c.tokens["admin"], &last)
	}, func() string { return "last /readyz: " + last })
	if err != nil {
		return err
	}

	c.RESTConfig = &rest.Config{
		Host:            c.Server,
		BearerToken:     c.tokens["admin"],
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData},
		QPS:             100,
		Burst:           200,
		UserAgent:       "lockstep-test-cluster",
	}
	c.Client, err = kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.AdminKubeconfig, err = c.KubeconfigForToken("admin", c.tokens["admin"])
	if err != nil {
		return err
	}
	// The bootstrap controller creates these namespaces asynchronously to /readyz.
	err = c.waitReady(ctx, c.apiserver, APIServerReadyTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem} {
			if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
				last = err.Error()
				return false, nil
			}
		}
		return true, nil
	}, func() string { return "namespaces default and kube-system: " + last })
	if err != nil {
		return err
	}
	c.logf("cluster: kube-apiserver ready in %s", time.Since(began).Round(time.Millisecond))
	return nil
}

// waitReady polls check every interval until it reports true, the process exits, or timeout
// passes. Errors name the component and carry the tail of its log and describe()'s last state.
func (c *Cluster) waitReady(ctx context.Context, p *process, timeout, interval time.Duration,
	check wait.ConditionWithContextFunc, describe func() string) error {
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, errExited
		}
		return check(ctx)
	})
	if err == nil {
		return nil
	}
	var what string
	switch {
	case errors.Is(err, errExited):
		what = fmt.Sprintf("exited before becoming ready (%v)", p.exitErr())
	case ctx.Err() != nil:
		what = fmt.Sprintf("not ready: %v", ctx.Err())
	case wait.Interrupted(err):
		what = fmt.Sprintf("did not become ready within %s", timeout)
	default:
		what = err.Error()
	}
	return fmt.Errorf("cluster: %s %s; %s\n--- last %d lines of %s ---\n%s", p.name, what, describe(),
		logTailLines, p.logPath, p.tail(logTailLines))
}

var errExited = errors.New("process exited")

// Stop stops kube-scheduler, kube-apiserver and etcd (each by its own process group: SIGTERM,
// then SIGKILL after StopTimeout) and removes WorkDir if Start created it and KeepWorkDir is
// false. It is safe to call more than once and on a partly started cluster.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.StopScheduler()
		for _, p := range []*process{c.apiserver, c.etcd} {
			if p != nil {
				p.stop(StopTimeout)
				c.logf("cluster: stopped %s", p.name)
			}
		}
		if c.removeWork {
			if err := os.RemoveAll(c.WorkDir); err != nil {
				c.logf("cluster: removing %s: %v", c.WorkDir, err)
			}
		}
	})
}

// Pids are the process IDs of the control plane's running components, for tools that watch
// what they cost.
func (c *Cluster) Pids() []int {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	var pids []int
	for _, p := range []*process{c.etcd, c.apiserver, c.scheduler} {
		if p != nil {
			pids = append(pids, p.pid())
		}
	}
	return pids
}

// Pid is the process ID of a running component: Etcd, KubeAPIServer, or KubeScheduler for the
// running scheduler whatever its binary; 0 when it does not run.
func (c *Cluster) Pid(component string) int {
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	p := map[string]*process{Etcd: c.etcd, KubeAPIServer: c.apiserver, KubeScheduler: c.scheduler}[component]
	if p == nil || p.exited() {
		return 0
	}
	return p.pid()
}

// Token returns the static token of a user named in Options.Users ("admin" is always there).
func (c *Cluster) Token(user string) string { return c.tokens[user] }

// LogTail returns the last n lines of a component's log (Etcd, KubeAPIServer, KubeScheduler), for
// test failure messages.
func (c *Cluster) LogTail(component string, n int) string {
	return tailFile(filepath.Join(c.WorkDir, component+".log"), n)
}

func (c *Cluster) writeTokenFile(users []User) (string, error) {
	var b strings.Builder
	add := func(u User) error {
		if u.Name == "" || strings.ContainsAny(u.Name, ",\"\n") {
			return fmt.Errorf("cluster: bad static user name %q", u.Name)
		}
		if _, dup := c.tokens[u.Name]; dup {
			return fmt.Errorf("cluster: static user %q listed twice", u.Name)
		}
		if u.Token == "" {
			u.Token = randomToken()
		}
		c.tokens[u.Name] = u.Token
		// token,user,uid,"group1,group2"
		fmt.Fprintf(&b, "%s,%s,%s,%q\n", u.Token, u.Name, u.Name, strings.Join(u.Groups, ","))
		return nil
	}
	if err := add(User{Name: "admin", Groups: []string{"system:masters"}}); err != nil {
		return "", err
	}
	for _, u := range users {
		if err := add(u); err != nil {
			return "", err
		}
	}
	path := filepath.Join(c.WorkDir, "tokens.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return path, nil
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}

// writeServiceAccountKeys writes a fresh RSA key pair for signing ServiceAccount tokens.
func writeServiceAccountKeys(dir string) (keyPath, pubPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("cluster: service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("cluster: service account key: %w", err)
	}
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(pubPath, pubPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("cluster: %w", err)
	}
	return keyPath, pubPath, nil
}

// caFromBundle picks the CA certificates out of kube-apiserver's self-signed apiserver.crt (the
// serving certificate followed by the CA that signed it).
func caFromBundle(bundle []byte) ([]byte, error) {
	var out []byte
	rest := bundle
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing kube-apiserver certificate: %w", err)
		}
		if cert.IsCA {
			out = append(out, pem.EncodeToMemory(block)...)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("kube-apiserver certificate file holds no CA certificate (yet)")
	}
	return out, nil
}

// probeReadyz asks a component's /readyz once. A transport error is not fatal (the component may
// still be starting); last keeps what it said, for the timeout message.
func probeReadyz(ctx context.Context, hc *http.Client, url, token string, last *string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		*last = err.Error()
		return false, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	*last = fmt.Sprintf("%s:\n%s", resp.Status, failedChecks(string(body)))
	return resp.StatusCode == http.StatusOK, nil
}

// failedChecks keeps the failing lines of a verbose /readyz answer (all of it if none is marked).
func failedChecks(body string) string {
	var failed []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "[-]") {
			failed = append(failed, l)
		}
	}
	if len(failed) == 0 {
		return strings.TrimSpace(body)
	}
	return strings.Join(failed, "\n")
}

func checkBinaries(dir string, names ...string) error {
	var missing []string
	for _, n := range names {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cluster: %s not found in %s: run `make control-plane` (hack/build-control-plane.sh) "+
			"to build the pinned etcd, kube-apiserver and kube-scheduler", strings.Join(missing, ", "), dir)
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cluster: picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RepoRoot walks up from the working directory to the directory whose go.mod declares
// ModulePath (skipping the tool modules under test/tools).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := modulePath(filepath.Join(dir, "go.mod")); err == nil && mod == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod declaring module %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

func modulePath(goMod string) (string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`), nil
		}
	}
	return "", errors.New("no module line")
}
