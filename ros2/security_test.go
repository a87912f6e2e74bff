package ros2

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeEnclave makes the six files of an enclave (empty: the plan checks
// only that they are there), leaving out the names in skip.
func fakeEnclave(t *testing.T, keystore, enclave string, skip ...string) string {
	t.Helper()
	dir := filepath.Join(keystore, "enclaves", filepath.FromSlash(strings.TrimPrefix(enclave, "/")))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range securityFiles {
		if !f.optional && !slices.Contains(skip, f.name) {
			if err := os.WriteFile(filepath.Join(dir, f.name), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// The keystore lookup follows rcl (enclave, override, Enforce or not) and
// the files rmw_dds_common's get_security_files wants.
func TestSecurityPlan(t *testing.T) {
	ks := filepath.Join(t.TempDir(), "key&store")
	agentDir := fakeEnclave(t, ks, "/robot1/zerohop_agent")
	fakeEnclave(t, ks, "/broken", "key.pem", "permissions.p7s")
	dirDir := fakeEnclave(t, ks, "/dir", "key.pem")
	if err := os.Mkdir(filepath.Join(dirDir, "key.pem"), 0o755); err != nil {
		t.Fatal(err)
	}
	crlDir := fakeEnclave(t, ks, "/with_crl")
	if err := os.WriteFile(filepath.Join(crlDir, "crl.pem"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		enclave       string
		sec           Security
		dir, err, why string
	}{
		{name: "off", sec: Security{Keystore: ks}},
		{name: "the node's enclave", enclave: "/robot1/zerohop_agent", sec: Security{Enable: true, Keystore: ks, Enforce: true}, dir: agentDir},
		{name: "override wins", enclave: "/other", sec: Security{Enable: true, Keystore: ks, Enforce: true, EnclaveOverride: "/robot1/zerohop_agent"}, dir: agentDir},
		{name: "no folder, enforced", enclave: "/nope", sec: Security{Enable: true, Keystore: ks, Enforce: true},
			err: "no folder for enclave /nope (--ros-args -e) in keystore " + ks},
		{name: "no folder, permissive", enclave: "/nope", sec: Security{Enable: true, Keystore: ks}, why: "ros2 security create_enclave"},
		{name: "root enclave has no files", sec: Security{Enable: true, Keystore: ks, Enforce: true}, err: "enclave / (" + filepath.Join(ks, "enclaves") + ") lacks identity_ca.cert.pem"},
		{name: "no enclave given", sec: Security{Enable: true, Keystore: filepath.Join(ks, "nothing"), Enforce: true}, err: "no folder for enclave / (no --ros-args -e given)"},
		{name: "files missing", enclave: "/broken", sec: Security{Enable: true, Keystore: ks, Enforce: true}, err: "lacks key.pem, permissions.p7s"},
		{name: "no keystore", enclave: "/x", sec: Security{Enable: true, Enforce: true}, err: "ROS_SECURITY_KEYSTORE is not set"},
		{name: "with a CRL", enclave: "/with_crl", sec: Security{Enable: true, Keystore: ks, Enforce: true}, dir: crlDir},
		{name: "bad enclave", enclave: "robot1", sec: Security{Enable: true, Keystore: ks, Enforce: true}, err: `enclave "robot1" (--ros-args -e): want an absolute name`},
		{name: "dots", enclave: "/../x", sec: Security{Enable: true, Keystore: ks, Enforce: true}, err: `enclave "/../x"`},
		{name: "digit", enclave: "/robot1/2nd", sec: Security{Enable: true, Keystore: ks, Enforce: true}, err: `enclave "/robot1/2nd" (--ros-args -e)`},
		{name: "a folder where a file goes", enclave: "/dir", sec: Security{Enable: true, Keystore: ks, Enforce: true}, err: "lacks key.pem"},
		{name: "override named", enclave: "/x", sec: Security{Enable: true, Keystore: ks, Enforce: true, EnclaveOverride: "/nope"}, err: "enclave /nope (ROS_SECURITY_ENCLAVE_OVERRIDE)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := Config{Enclave: tc.enclave, Security: tc.sec}.securityPlan()
			switch {
			case tc.err != "":
				if err == nil || !errors.Is(err, errSecurity) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if plan.dir != tc.dir && tc.dir != "" || !strings.Contains(plan.insecureWhy, tc.why) || (tc.why == "") != (plan.insecureWhy == "") {
				t.Errorf("plan %+v", plan)
			}
			if (tc.dir != "") != (plan.props != nil) {
				t.Fatalf("properties %q", plan.props)
			}
			if tc.dir != "" {
				got := map[string]string{}
				for _, p := range plan.props {
					got[p[0]] = p[1]
				}
				for _, f := range securityFiles {
					want := "file:" + filepath.Join(tc.dir, f.name)
					if f.optional && tc.dir != crlDir {
						want = "" // crl.pem: only in /with_crl
					}
					if got[f.property] != want {
						t.Errorf("%s = %q, want %q", f.property, got[f.property], want)
					}
				}
				if got["dds.sec.auth.library.path"] != "dds_security_auth" || got["dds.sec.access.library.init"] != "init_access_control" {
					t.Errorf("plugins %v", got)
				}
			}
		})
	}
}

func TestSecurityFromEnv(t *testing.T) {
	env := map[string]string{"ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_KEYSTORE": "/ks", "ROS_SECURITY_STRATEGY": "Enforce", "ROS_SECURITY_ENCLAVE_OVERRIDE": "/e"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := ConfigFromEnv(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if c.Security != (Security{Enable: true, Keystore: "/ks", Enforce: true, EnclaveOverride: "/e"}) {
		t.Errorf("%+v", c.Security)
	}
	// rcl takes only "true" and "Enforce".
	env["ROS_SECURITY_ENABLE"], env["ROS_SECURITY_STRATEGY"] = "1", "enforce"
	if c, _ = ConfigFromEnv(lookup); c.Security.Enable || c.Security.Enforce ||
		c.Security.Note != `ROS_SECURITY_ENABLE="1" is not "true": security is off; ROS_SECURITY_STRATEGY="enforce" is not "Enforce": security is not enforced` {
		t.Errorf("%+v", c.Security)
	}
}
