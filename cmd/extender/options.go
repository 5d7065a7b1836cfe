package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-sched/lockstep/dra"
	"github.com/lockstep-sched/lockstep/extender"
	"github.com/lockstep-sched/lockstep/fabric"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/serving"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// bindMargin is the least time left between a held bind's answer and the scheduler giving up on
// the call: the answer must cross the network and be decoded before httpTimeout fires.
const bindMargin = time.Second

// maxGatherWait bounds --gather-wait: while a member waits at filter, kube-scheduler's loop waits
// with it, and a gang gathers for five of these at most.
const maxGatherWait = time.Second

// Bindings get a rate limit well above what kube-scheduler can ask of them: it binds one pod at a
// time from one scheduling loop, about 200 pods/s on 2 cores (make bench) and a few hundred on
// large control planes (upstream's scheduler_perf), and each binding is one write. 500/s with a
// burst of 1,000 leaves the limiter idle at any rate the scheduler reaches, absorbs many gangs
// committing at once, and still stops a runaway loop; the apiserver's own priority and fairness
// answers 429 if it is overloaded, and lockstep retries those.
const (
	defaultBindQPS   = 500
	defaultBindBurst = 1000
)

// Nominations come at most one per gang member, as fast as the scheduler reserves gangs: below
// the bindings that follow them. A nomination that waits on the limiter is only a hint that comes
// late: the member's cycle then filters every node, as it would without one.
const (
	defaultNominateQPS   = 300
	defaultNominateBurst = 600
)

// nominateWorkers write nominations at once: enough that a burst of gangs is nominated ahead of
// the members' cycles over loopback or a LAN, few enough to leave the apiserver to bindings.
const nominateWorkers = 4

// defaultSchedulerHTTPTimeout is kube-scheduler's httpTimeout when an extender stanza leaves it unset.
const defaultSchedulerHTTPTimeout = 5 * time.Second

type options struct {
	kubeconfig  string
	listen      string
	debugListen string
	// metricsListen serves /metrics alone (see the flag); empty: off.
	metricsListen string
	tlsCertFile   string
	tlsKeyFile    string
	clientCAFile  string
	// leaderLease is --leader-election-lease, namespace/name; leaseNamespace and leaseName are
	// it split by validate.
	leaderLease, leaseNamespace, leaseName string
	leaderIdentity                         string
	bindWait                               time.Duration
	httpTimeout                            time.Duration
	schedulerConfig                        string
	defaultWaitingTime                     time.Duration
	commitTimeout                          time.Duration
	// groupDiscoveryInterval: see the flag.
	groupDiscoveryInterval time.Duration
	// yunikornNamespace is where YuniKorn's queue ConfigMaps are read; "" reads none.
	yunikornNamespace string
	// gpuClasses and releaseDevices: see the flags.
	gpuClasses          []string
	releaseDevices      bool
	maxRequestBytes     int64
	gangPreemption      bool
	takeBackExtras      bool
	queueReclaim        bool
	shortlist           bool
	nominate            bool
	starvationThreshold time.Duration
	gatherWait          time.Duration
	// topologyTiers is the --topology-tiers flag; tiers is it parsed by validate.
	topologyTiers string
	tiers         fabric.Tiers
	qps           float64
	burst         int
	bindQPS       float64
	bindBurst     int
	eventsQPS     float64
	eventsBurst   int
	nominateQPS   float64
	nominateBurst int
	gcPercent     int
	memoryLimit   int64
	profiling     bool
}

func defaultOptions() options {
	return options{
		listen:             "127.0.0.1:8888",
		debugListen:        "127.0.0.1:8889",
		bindWait:           gang.DefaultBindWait,
		httpTimeout:        defaultSchedulerHTTPTimeout,
		defaultWaitingTime: gang.DefaultWaitingTime,
		commitTimeout:      gang.DefaultCommitTimeout,
		// A CRD is installed once per cluster; half a minute to notice costs nothing, and
		// discovery is cheap enough to ask that often.
		groupDiscoveryInterval: 30 * time.Second,
		yunikornNamespace:      wellknown.NamespaceYuniKorn,
		gpuClasses:             dra.DefaultGPUClasses,
		releaseDevices:         true,
		maxRequestBytes:        extender.DefaultMaxRequestBytes,
		gangPreemption:         true,
		takeBackExtras:         true,
		shortlist:              true,
		nominate:               false,
		starvationThreshold:    gang.DefaultStarvationThreshold,
		gatherWait:             gang.DefaultGatherWait,
		qps:                    50,
		burst:                  100,
		bindQPS:                defaultBindQPS,
		bindBurst:              defaultBindBurst,
		eventsQPS:              20,
		eventsBurst:            50,
		nominateQPS:            defaultNominateQPS,
		nominateBurst:          defaultNominateBurst,
		gcPercent:              400,
		memoryLimit:            256 << 20,
	}
}

// newFlagSet returns a flag set bound to o, for tests that parse shipped argument lists.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("extender", flag.ContinueOnError)
	o.register(fs)
	return fs
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "kubeconfig file; empty means the in-cluster service account")
	fs.StringVar(&o.listen, "listen", o.listen, "HOST:PORT to serve kube-scheduler's calls (POST /filter, /prioritize, /bind, /preempt) and the probes (/healthz, /readyz) on; an address other than loopback needs --tls-cert-file, --tls-private-key-file and --client-ca-file, so that only the scheduler can bind pods")
	fs.StringVar(&o.debugListen, "debug-listen", o.debugListen, "HOST:PORT to serve what people and Prometheus read on (/debug/gangs, /debug/nodes, /metrics, /debug/pprof/ with --profiling), plain HTTP without authentication: keep it on loopback (kubectl port-forward reaches it) unless a NetworkPolicy or proxy guards it; empty turns it off")
	fs.StringVar(&o.metricsListen, "metrics-listen", o.metricsListen, "HOST:PORT to serve Prometheus' /metrics on and nothing else (no /debug/*, no probes), plain HTTP: unlike --debug-listen it lists no pods, so it may be opened to the monitoring namespace; empty turns it off")
	fs.StringVar(&o.leaderLease, "leader-election-lease", o.leaderLease, "NAMESPACE/NAME of the Lease the scheduler lockstep serves elects its leader with (leaderElection.resourceNamespace/resourceName in its configuration): with several scheduler replicas, only the leader's lockstep writes PodGroup statuses and pod conditions. Empty: the scheduler runs alone and lockstep always writes")
	fs.StringVar(&o.leaderIdentity, "leader-identity", o.leaderIdentity, "the hostname the scheduler's leader identity (<hostname>_<uuid>) starts with; default this host's name, which the containers of one pod share")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", o.tlsCertFile, "PEM certificate (chain) to serve --listen over HTTPS with; re-read when the file changes")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", o.tlsKeyFile, "PEM private key of --tls-cert-file; re-read when the file changes")
	fs.StringVar(&o.clientCAFile, "client-ca-file", o.clientCAFile, "PEM CA bundle: the verbs answer only clients presenting a certificate it signed (403 otherwise; /healthz and /readyz stay open); re-read when the file changes")
	fs.DurationVar(&o.bindWait, "bind-wait", o.bindWait, "how long a gang member's bind call is held waiting for quorum before it answers with an error (the pod keeps its reservation and lockstep binds it when the quorum arrives); must be at least 1s below the scheduler's httpTimeout")
	fs.DurationVar(&o.httpTimeout, "scheduler-http-timeout", o.httpTimeout, "the httpTimeout of lockstep's stanza in the scheduler configuration (kube-scheduler uses 5s when unset); ignored when --scheduler-config is given")
	fs.StringVar(&o.schedulerConfig, "scheduler-config", o.schedulerConfig, "KubeSchedulerConfiguration file the scheduler runs with; lockstep reads its extender httpTimeout from it")
	fs.DurationVar(&o.defaultWaitingTime, "default-waiting-time", o.defaultWaitingTime, "how long a gang's reservation lives when its pods carry no "+wellknown.AnnotationGangWaitingTime+" annotation")
	fs.StringVar(&o.yunikornNamespace, "yunikorn-namespace", o.yunikornNamespace, "the namespace of YuniKorn's ConfigMaps yunikorn-configs and yunikorn-defaults, whose queues.yaml defines YuniKorn's queues (lockstep reads those two by name only); empty reads no YuniKorn queues file")
	fs.DurationVar(&o.groupDiscoveryInterval, "group-discovery-interval", o.groupDiscoveryInterval, "how often lockstep asks the apiserver which PodGroup APIs (scheduler-plugins, Koordinator, Volcano, kube-batch) and queue APIs (Volcano's and kube-batch's Queues, scheduler-plugins' ElasticQuotas) it serves, and whether it serves Dynamic Resource Allocation (resource.k8s.io/v1); a CRD installed later is watched from the next look on")
	fs.Func("dra-gpu-classes", "comma-separated DeviceClasses (resource.k8s.io) whose devices count as GPUs, beside any class whose spec.extendedResourceName is nvidia.com/gpu; default NVIDIA's DRA driver's "+strings.Join(dra.DefaultGPUClasses, ",")+"; empty: only those serving nvidia.com/gpu", func(v string) error {
		o.gpuClasses = nil
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				o.gpuClasses = append(o.gpuClasses, c)
			}
		}
		return nil
	})
	fs.BoolVar(&o.releaseDevices, "release-waiting-devices", o.releaseDevices, "give back the DRA devices kube-scheduler allocated for a gang member's claims once no reservation holds the member (expired, taken over), by clearing the claim's allocation as the scheduler does for a pod it cannot place; false leaves them allocated until the member binds or goes")
	fs.DurationVar(&o.commitTimeout, "commit-timeout", o.commitTimeout, "how long lockstep keeps retrying the bindings of a gang that reached quorum")
	fs.BoolVar(&o.gangPreemption, "gang-preemption", o.gangPreemption, "let a gang whose quorum does not fit evict lower-priority pods for it, whole gangs or ordinary pods, through the Eviction API (PodDisruptionBudgets hold); false leaves preemption to kube-scheduler alone, which lockstep keeps from breaking gangs")
	fs.BoolVar(&o.takeBackExtras, "take-back-extras", o.takeBackExtras, "let a gang waiting for its quorum evict, through the Eviction API, members beyond their own gang's min-available (an elastic job's extra workers) of gangs of equal or lower priority, the youngest first, never cutting a gang below its quorum; a member annotated lockstep.dev/keep-extras: \"true\" is never taken; false lets extras that bound first keep later gangs from their quorums")
	fs.BoolVar(&o.queueReclaim, "queue-reclaim", o.queueReclaim, "let a gang whose team queue (Volcano or kube-batch Queue, ElasticQuota) is below its fair share evict, through the Eviction API, what queues above their share hold: members beyond their gang's quorum first, whole gangs only, never a queue below its share, guarantee or min, and only after a dry run shows the gang then fits; off, as in Volcano's shipped configuration and Kueue's default, a queue below its share waits for capacity to free")
	fs.BoolVar(&o.shortlist, "shortlist", o.shortlist, "filter passes a pod that is not a gang member and requests GPUs only the nodes lockstep's packing ranks best (ties kept, for the scheduler's scores to break), unless the pod has preferred affinity, a ScheduleAnyway spread constraint, or a ReplicaSet, StatefulSet or ReplicationController owner; false passes every node it fits and leaves lockstep's packing one score among the scheduler's")
	fs.StringVar(&o.topologyTiers, "topology-tiers", o.topologyTiers, "network tiers between nodes, narrowest first: a comma-separated list of node label keys, each optionally named as name=key for gangs that ask by name (a node without a tier's label sits alone there), or a preset: "+fabric.PresetNames()+"; a gang's quorum goes to the narrowest single domain that holds it. Empty: by nodes alone")
	fs.DurationVar(&o.gatherWait, "gather-wait", o.gatherWait, "how long past the latest arrival of a gang's member a member that lacks only the rest of its gang waits at filter for the next one, rather than be turned away (5 times this in all per gang, the scheduler paused meanwhile); 0 turns waiting off")
	fs.DurationVar(&o.starvationThreshold, "starvation-threshold", o.starvationThreshold, "how long a gang whose quorum fits the cluster may wait for free capacity before lockstep holds capacity for it as it frees, keeping pods and gangs of equal or lower priority off it; 0 turns the rule off")
	fs.Int64Var(&o.maxRequestBytes, "max-request-bytes", o.maxRequestBytes, "largest request body accepted; larger ones get 413")
	fs.Float64Var(&o.qps, "kube-api-qps", o.qps, "queries per second to the apiserver for everything but bindings, events and pod conditions (informers' lists)")
	fs.IntVar(&o.burst, "kube-api-burst", o.burst, "burst of queries to the apiserver for everything but bindings, events and pod conditions")
	fs.Float64Var(&o.bindQPS, "bind-qps", o.bindQPS, "queries per second for bindings and the pod reads that settle them, on a client and rate limit of their own; one binding is one write")
	fs.IntVar(&o.bindBurst, "bind-burst", o.bindBurst, "burst of bindings (a gang's commit writes min-available at once)")
	fs.Float64Var(&o.eventsQPS, "events-qps", o.eventsQPS, "queries per second for events and pod conditions, on a client of their own so they never delay a binding; under pressure they are dropped")
	fs.IntVar(&o.eventsBurst, "events-burst", o.eventsBurst, "burst of event and pod-condition writes")
	fs.BoolVar(&o.nominate, "nominate-reserved", o.nominate, "write status.nominatedNodeName on the members of a gang lockstep reserved for, naming the node held for each, so that kube-scheduler tries that node alone first instead of filtering and scoring every node; lockstep clears it when the reservation ends without binding them. One write per member")
	fs.Float64Var(&o.nominateQPS, "nominate-qps", o.nominateQPS, "queries per second for --nominate-reserved writes, on a client of their own so they never delay a binding")
	fs.IntVar(&o.nominateBurst, "nominate-burst", o.nominateBurst, "burst of --nominate-reserved writes")
	fs.IntVar(&o.gcPercent, "gc-percent", o.gcPercent, "Go garbage collection target (GOGC); a collection slows the calls it overlaps, and collecting less often than Go's default of 100 keeps them rare. The GOGC environment variable wins when set")
	fs.Int64Var(&o.memoryLimit, "memory-limit", o.memoryLimit, "soft memory limit in bytes (GOMEMLIMIT): near it the collector runs more often, which bounds memory despite --gc-percent; 0 for none. The GOMEMLIMIT environment variable wins when set")
	fs.BoolVar(&o.profiling, "profiling", o.profiling, "serve Go's profiler under /debug/pprof/ on the --debug-listen address")
}

// tuneGC applies --gc-percent and --memory-limit unless the standard environment variables
// already set them.
func (o *options) tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(o.gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" && o.memoryLimit > 0 {
		debug.SetMemoryLimit(o.memoryLimit)
	}
}

// validate checks the flags against each other and, when given, against the scheduler's own
// configuration, so that a held bind can never outlive the call it answers.
func (o *options) validate() error {
	if o.schedulerConfig != "" {
		cfg, err := readSchedulerConfig(o.schedulerConfig)
		if err != nil {
			return err
		}
		if o.httpTimeout, err = extenderHTTPTimeout(o.schedulerConfig, cfg); err != nil {
			return err
		}
		if names := profilesWithGangPlugin(cfg); len(names) > 0 {
			klog.InfoS("WARNING: these profiles leave kube-scheduler's GangScheduling plugin on. Where kube-scheduler runs with --feature-gates=GangScheduling=true, it gates Kubernetes PodGroups (scheduling.k8s.io) a second time with a fixed 5-minute wait, and lockstep leaves their PodGroupScheduled condition to it. Disable it in each profile (plugins.multiPoint.disabled: [{name: GangScheduling}]), as the shipped configurations do",
				"schedulerConfig", o.schedulerConfig, "profiles", names)
		}
	}
	tiers, err := fabric.Parse(o.topologyTiers)
	if err != nil {
		return fmt.Errorf("--topology-tiers: %w", err)
	}
	o.tiers = tiers
	if o.bindWait <= 0 {
		return fmt.Errorf("--bind-wait must be positive, got %s", o.bindWait)
	}
	if o.bindWait > o.httpTimeout-bindMargin {
		return fmt.Errorf("--bind-wait=%s must be at most %s: the scheduler gives up on every extender call after its httpTimeout (%s) and a held bind needs %s to answer; raise httpTimeout in the scheduler configuration or lower --bind-wait",
			o.bindWait, o.httpTimeout-bindMargin, o.httpTimeout, bindMargin)
	}
	if o.gatherWait < 0 || o.gatherWait > maxGatherWait {
		return fmt.Errorf("--gather-wait must be between 0 and %s, got %s: kube-scheduler schedules nothing else while a member waits", maxGatherWait, o.gatherWait)
	}
	if o.defaultWaitingTime <= 0 {
		return fmt.Errorf("--default-waiting-time must be positive, got %s", o.defaultWaitingTime)
	}
	if o.gcPercent <= 0 {
		return fmt.Errorf("--gc-percent must be positive, got %d", o.gcPercent)
	}
	if o.memoryLimit < 0 {
		return fmt.Errorf("--memory-limit must not be negative, got %d", o.memoryLimit)
	}
	for _, l := range o.rateLimits() {
		if l.qps <= 0 || l.burst <= 0 {
			return fmt.Errorf("--%s-qps and --%s-burst must be positive, got %g and %d", l.flag, l.flag, l.qps, l.burst)
		}
	}
	if o.maxRequestBytes <= 0 {
		return fmt.Errorf("--max-request-bytes must be positive, got %d", o.maxRequestBytes)
	}
	if err := o.validateLease(); err != nil {
		return err
	}
	return o.validateListen()
}

func (o *options) validateLease() error {
	if o.leaderLease == "" {
		return nil
	}
	ns, name, ok := strings.Cut(o.leaderLease, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("--leader-election-lease=%s: want NAMESPACE/NAME, e.g. lockstep-system/lockstep-scheduler", o.leaderLease)
	}
	o.leaseNamespace, o.leaseName = ns, name
	if o.leaderIdentity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--leader-identity not given and the hostname is unreadable: %w", err)
		}
		o.leaderIdentity = host
	}
	return nil
}

// validateListen refuses to open /bind to the network without client certificates: whoever
// reaches it binds any pod anywhere with lockstep's credentials.
func (o *options) validateListen() error {
	loopback, err := serving.IsLoopback(o.listen)
	if err != nil {
		return fmt.Errorf("--listen=%s: %w", o.listen, err)
	}
	if !loopback && (o.clientCAFile == "" || o.tlsCertFile == "") {
		return fmt.Errorf("--listen=%s is reachable from the network, and the verbs there bind pods: give --tls-cert-file, --tls-private-key-file and --client-ca-file so that only the scheduler's certificate is answered, or listen on 127.0.0.1", o.listen)
	}
	if o.metricsListen != "" {
		if _, err := serving.IsLoopback(o.metricsListen); err != nil {
			return fmt.Errorf("--metrics-listen=%s: %w", o.metricsListen, err)
		}
	}
	if o.debugListen == "" {
		return nil
	}
	if loopback, err = serving.IsLoopback(o.debugListen); err != nil {
		return fmt.Errorf("--debug-listen=%s: %w", o.debugListen, err)
	}
	if !loopback {
		klog.InfoS("WARNING: --debug-listen is reachable from the network and serves /debug/gangs (pods of every namespace) and /metrics without authentication; guard it with a NetworkPolicy or a proxy", "address", o.debugListen)
	}
	return nil
}

// readSchedulerConfig reads the KubeSchedulerConfiguration file the scheduler runs with.
func readSchedulerConfig(path string) (*schedconfigv1.KubeSchedulerConfiguration, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--scheduler-config: %w", err)
	}
	var cfg schedconfigv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return nil, fmt.Errorf("--scheduler-config %s: %w", path, err)
	}
	return &cfg, nil
}

// gangPlugin is kube-scheduler's own gang scheduling plugin (1.35+, gate GangScheduling).
const gangPlugin = "GangScheduling"

// profilesWithGangPlugin names the profiles that do not disable gangPlugin, where kube-scheduler
// would run it whenever its gate is on. A profile without a name is kube-scheduler's default one.
func profilesWithGangPlugin(cfg *schedconfigv1.KubeSchedulerConfiguration) []string {
	profiles := cfg.Profiles
	if len(profiles) == 0 {
		profiles = []schedconfigv1.KubeSchedulerProfile{{}}
	}
	var out []string
	for _, p := range profiles {
		if !disablesGangPlugin(p.Plugins) {
			name := "default-scheduler"
			if p.SchedulerName != nil {
				name = *p.SchedulerName
			}
			out = append(out, name)
		}
	}
	return out
}

// disablesGangPlugin reports whether a profile's plugins disable gangPlugin everywhere: by name,
// or with "*", at the multiPoint extension point, where the scheduler enables it.
func disablesGangPlugin(plugins *schedconfigv1.Plugins) bool {
	if plugins == nil {
		return false
	}
	for _, p := range plugins.MultiPoint.Disabled {
		if p.Name == gangPlugin || p.Name == "*" {
			return true
		}
	}
	return false
}

// extenderHTTPTimeout reads the httpTimeout of the extender stanza that binds (lockstep's) from
// the scheduler's configuration, read from path.
func extenderHTTPTimeout(path string, cfg *schedconfigv1.KubeSchedulerConfiguration) (time.Duration, error) {
	for _, e := range cfg.Extenders {
		if e.BindVerb == "" {
			continue
		}
		if e.HTTPTimeout.Duration == 0 {
			return defaultSchedulerHTTPTimeout, nil
		}
		return e.HTTPTimeout.Duration, nil
	}
	return 0, fmt.Errorf("--scheduler-config %s: no extender with a bindVerb; lockstep must be the binder", path)
}

// clients are lockstep's connections to the apiserver, one per kind of traffic, each with a rate
// limit of its own: a burst of events or condition writes must never make a binding wait.
type clients struct {
	main, bind, events, nominate kubernetes.Interface
	// groups reads and writes other gang schedulers' PodGroups (package podgroup), under main's
	// rate limit: their traffic is a few writes per gang.
	groups    dynamic.Interface
	discovery discovery.DiscoveryInterface
}

func (o *options) kubeClients() (clients, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	if err != nil {
		return clients{}, fmt.Errorf("loading kubeconfig %q: %w", o.kubeconfig, err)
	}
	cfg.UserAgent = "lockstep"
	// Protobuf halves what the initial list of every pod in the cluster costs to decode.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	limits := o.rateLimits()
	configs := make([]*rest.Config, len(limits))
	built := make([]kubernetes.Interface, len(limits))
	for i, l := range limits {
		configs[i] = rest.CopyConfig(cfg)
		configs[i].QPS, configs[i].Burst = float32(l.qps), l.burst
		if built[i], err = kubernetes.NewForConfig(configs[i]); err != nil {
			return clients{}, err
		}
	}
	c := clients{main: built[0], bind: built[1], events: built[2], nominate: built[3], discovery: built[0].Discovery()}
	if c.groups, err = dynamic.NewForConfig(configs[0]); err != nil {
		return clients{}, err
	}
	return c, nil
}

// rateLimit is one client's limit and the flags that set it (--<flag>-qps, --<flag>-burst).
type rateLimit struct {
	flag  string
	qps   float64
	burst int
}

// rateLimits lists the clients' limits in the order of clients' fields: main, bind, events,
// nominate.
func (o *options) rateLimits() []rateLimit {
	return []rateLimit{{"kube-api", o.qps, o.burst}, {"bind", o.bindQPS, o.bindBurst}, {"events", o.eventsQPS, o.eventsBurst}, {"nominate", o.nominateQPS, o.nominateBurst}}
}
