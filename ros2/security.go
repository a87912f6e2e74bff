package ros2

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zerohop/zerohop/ros2/rosargs"
)

// Security is SROS2, as the ROS_SECURITY_* variables ask for it
// (ConfigFromEnv): DDS Security (authentication, access control and
// encryption) with the certificates and signed documents of the node's
// enclave in a keystore that `ros2 security` made. The zero value is off.
type Security struct {
	Enable   bool   // ROS_SECURITY_ENABLE=true
	Keystore string // ROS_SECURITY_KEYSTORE: the keystore's folder
	// Enforce (ROS_SECURITY_STRATEGY=Enforce) refuses to start without
	// the enclave's files; otherwise the node then runs without security,
	// saying so.
	Enforce bool
	// EnclaveOverride (ROS_SECURITY_ENCLAVE_OVERRIDE) replaces the
	// node's enclave (Config.Enclave, --ros-args -e) in the keystore
	// lookup.
	EnclaveOverride string
	// Note, from ConfigFromEnv, says which ROS_SECURITY_* values rcl
	// would not take ("1" for "true", "enforce" for "Enforce"), for the
	// participant to log: they leave security off or unenforced.
	Note string
}

// securityFiles are the files of an enclave (rmw_dds_common's
// get_security_files) and the participant QoS properties rmw_cyclonedds
// puts them in; optional ones may be missing.
var securityFiles = [...]struct {
	name, property string
	optional       bool
}{
	{"identity_ca.cert.pem", "dds.sec.auth.identity_ca", false},
	{"cert.pem", "dds.sec.auth.identity_certificate", false},
	{"key.pem", "dds.sec.auth.private_key", false},
	{"permissions_ca.cert.pem", "dds.sec.access.permissions_ca", false},
	{"governance.p7s", "dds.sec.access.governance", false},
	{"permissions.p7s", "dds.sec.access.permissions", false},
	// A certificate revocation list: peers whose certificates it lists
	// are refused.
	{"crl.pem", "org.eclipse.cyclonedds.sec.auth.crl", true},
}

// securityPlugins are Cyclone's plugins, by name as rmw_cyclonedds loads
// them (Cyclone finds libdds_security_*.so where it keeps its plugins).
var securityPlugins = [][2]string{
	{"dds.sec.auth.library.path", "dds_security_auth"},
	{"dds.sec.auth.library.init", "init_authentication"},
	{"dds.sec.auth.library.finalize", "finalize_authentication"},
	{"dds.sec.crypto.library.path", "dds_security_crypto"},
	{"dds.sec.crypto.library.init", "init_crypto"},
	{"dds.sec.crypto.library.finalize", "finalize_crypto"},
	{"dds.sec.access.library.path", "dds_security_ac"},
	{"dds.sec.access.library.init", "init_access_control"},
	{"dds.sec.access.library.finalize", "finalize_access_control"},
}

// securityPlan is what the participant does about security: the QoS
// properties (none: no security), the enclave and its folder, and, for a
// permissive start without security, why.
type securityPlan struct {
	props       [][2]string
	enclave     string
	dir         string
	insecureWhy string
}

// errSecurity marks the errors of an enforced security set-up.
var errSecurity = errors.New("ros2: SROS2 security")

// securityPlan resolves c.Security as rcl and rmw_cyclonedds do: the
// enclave (EnclaveOverride, else Config.Enclave, else "/") names the
// folder <keystore>/enclaves<enclave>, which must hold the files of
// securityFiles as regular files (or links to them, as sros2 makes).
// Under Enforce anything missing is an error; otherwise the plan is to
// run without security, with the reason.
func (c Config) securityPlan() (securityPlan, error) {
	s := c.Security
	if !s.Enable {
		return securityPlan{}, nil
	}
	enclave, from := c.Enclave, "--ros-args -e"
	if s.EnclaveOverride != "" {
		enclave, from = s.EnclaveOverride, "ROS_SECURITY_ENCLAVE_OVERRIDE"
	}
	if enclave == "" {
		enclave, from = "/", "no --ros-args -e given"
	}
	plan := securityPlan{enclave: enclave}
	fail := func(format string, args ...any) (securityPlan, error) {
		why := fmt.Sprintf(format, args...)
		if s.Enforce {
			return securityPlan{}, fmt.Errorf("%w: %s (ROS_SECURITY_STRATEGY=Enforce)", errSecurity, why)
		}
		plan.insecureWhy = why
		return plan, nil
	}
	if !rosargs.IsNamespace(enclave) {
		return fail("enclave %q (%s): want an absolute name such as /robot1/zerohop_agent (tokens of letters, digits and '_', not starting with a digit)", enclave, from)
	}
	if s.Keystore == "" {
		return fail("ROS_SECURITY_ENABLE=true but ROS_SECURITY_KEYSTORE is not set")
	}
	keystore, err := filepath.Abs(s.Keystore)
	if err != nil {
		return fail("ROS_SECURITY_KEYSTORE %q: %v", s.Keystore, err)
	}
	plan.dir = filepath.Join(keystore, "enclaves", filepath.FromSlash(strings.TrimPrefix(enclave, "/")))
	if st, err := os.Stat(plan.dir); err != nil || !st.IsDir() {
		return fail("no folder for enclave %s (%s) in keystore %s (%s): make it with `ros2 security create_enclave %s %s`",
			enclave, from, keystore, plan.dir, keystore, enclave)
	}
	var missing []string
	var props [][2]string
	for _, f := range securityFiles {
		path := filepath.Join(plan.dir, f.name)
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			if !f.optional {
				missing = append(missing, f.name)
			}
			continue
		}
		props = append(props, [2]string{f.property, "file:" + path})
	}
	if len(missing) > 0 {
		return fail("enclave %s (%s) lacks %s", enclave, plan.dir, strings.Join(missing, ", "))
	}
	plan.props = append(props, securityPlugins...)
	return plan, nil
}
