package ros2

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
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
}

// securityFiles are the files of an enclave (rmw_dds_common's
// get_security_files) and the Cyclone settings they go to.
var securityFiles = [...]struct{ name, element string }{
	{"identity_ca.cert.pem", "IdentityCA"},
	{"cert.pem", "IdentityCertificate"},
	{"key.pem", "PrivateKey"},
	{"permissions_ca.cert.pem", "PermissionsCA"},
	{"governance.p7s", "Governance"},
	{"permissions.p7s", "Permissions"},
}

// securityPlan is what the participant does about security: Cyclone's
// configuration fragment (empty: none), the enclave and its folder, and,
// for a permissive start without security, why.
type securityPlan struct {
	xml         string
	enclave     string
	dir         string
	insecureWhy string
}

// errSecurity marks the errors of an enforced security set-up.
var errSecurity = errors.New("ros2: SROS2 security")

// securityPlan resolves c.Security as rcl and rmw_cyclonedds do: the
// enclave (EnclaveOverride, else Config.Enclave, else "/") names the
// folder <keystore>/enclaves<enclave>, which must hold the six files of
// securityFiles. Under Enforce anything missing is an error; otherwise the
// plan is to run without security, with the reason.
func (c Config) securityPlan() (securityPlan, error) {
	s := c.Security
	if !s.Enable {
		return securityPlan{}, nil
	}
	enclave := c.Enclave
	if s.EnclaveOverride != "" {
		enclave = s.EnclaveOverride
	}
	if enclave == "" {
		enclave = "/"
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
	if !strings.HasPrefix(enclave, "/") || strings.Contains(enclave, "//") || (len(enclave) > 1 && strings.HasSuffix(enclave, "/")) ||
		strings.ContainsFunc(enclave, func(r rune) bool { return r != '/' && r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		return fail("enclave %q: want an absolute name such as /robot1/zerohop_agent (letters, digits, '_' between '/')", enclave)
	}
	if s.Keystore == "" {
		return fail("ROS_SECURITY_ENABLE=true but ROS_SECURITY_KEYSTORE is not set")
	}
	if strings.ContainsAny(s.Keystore, ",\x00") {
		// Cyclone's configuration is a comma-separated list.
		return fail("ROS_SECURITY_KEYSTORE %q: a path with ',' cannot be given to Cyclone DDS", s.Keystore)
	}
	keystore, err := filepath.Abs(s.Keystore)
	if err != nil {
		return fail("ROS_SECURITY_KEYSTORE %q: %v", s.Keystore, err)
	}
	plan.dir = filepath.Join(keystore, "enclaves", filepath.FromSlash(strings.TrimPrefix(enclave, "/")))
	if st, err := os.Stat(plan.dir); err != nil || !st.IsDir() {
		return fail("no folder for enclave %s in keystore %s (%s): make it with `ros2 security create_enclave %s %s`, or name the node's enclave with --ros-args -e",
			enclave, keystore, plan.dir, keystore, enclave)
	}
	var b strings.Builder
	b.WriteString(`<CycloneDDS><Domain id="any"><Security>`)
	url := map[string]string{}
	var missing []string
	for _, f := range securityFiles {
		path := filepath.Join(plan.dir, f.name)
		if _, err := os.Stat(path); err != nil {
			missing = append(missing, f.name)
			continue
		}
		url[f.element] = "file:" + xmlText(path)
	}
	if len(missing) > 0 {
		return fail("enclave %s (%s) lacks %s", enclave, plan.dir, strings.Join(missing, ", "))
	}
	// The plugins by name, as rmw_cyclonedds loads them: Cyclone finds
	// libdds_security_*.so where it keeps its own plugins.
	fmt.Fprintf(&b, `<Authentication><Library initFunction="init_authentication" finalizeFunction="finalize_authentication" path="dds_security_auth"/>`+
		`<IdentityCA>%s</IdentityCA><IdentityCertificate>%s</IdentityCertificate><PrivateKey>%s</PrivateKey></Authentication>`,
		url["IdentityCA"], url["IdentityCertificate"], url["PrivateKey"])
	b.WriteString(`<Cryptographic><Library initFunction="init_crypto" finalizeFunction="finalize_crypto" path="dds_security_crypto"/></Cryptographic>`)
	fmt.Fprintf(&b, `<AccessControl><Library initFunction="init_access_control" finalizeFunction="finalize_access_control" path="dds_security_ac"/>`+
		`<PermissionsCA>%s</PermissionsCA><Governance>%s</Governance><Permissions>%s</Permissions></AccessControl>`,
		url["PermissionsCA"], url["Governance"], url["Permissions"])
	b.WriteString(`</Security></Domain></CycloneDDS>`)
	plan.xml = b.String()
	return plan, nil
}

// xmlText escapes s for XML character data.
func xmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
