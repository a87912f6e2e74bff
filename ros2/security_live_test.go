//go:build ros2 && cgo

package ros2

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zerohop/zerohop/planner"
)

// testKeystore makes an SROS2 keystore with the enclaves given
// (testdata/sros2/keystore.sh, OpenSSL).
func testKeystore(t *testing.T, enclaves ...string) string {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("ZEROHOP_REQUIRE_ROS2") == "1" {
			t.Fatal("ZEROHOP_REQUIRE_ROS2=1 but openssl is not installed (make deps installs it)")
		}
		t.Skip("openssl not installed; cannot make a test keystore")
	}
	ks := filepath.Join(t.TempDir(), "keystore")
	out, err := exec.Command("testdata/sros2/keystore.sh", append([]string{ks}, enclaves...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("keystore.sh: %v\n%s", err, out)
	}
	return ks
}

// peerSecurity is the Cyclone configuration that secures a test peer with
// the enclave folder dir: the <Security> section of Cyclone's XML, the
// other way to give what the participant gives as QoS properties.
func peerSecurity(keystore, enclave string) string {
	dir := filepath.Join(keystore, "enclaves", filepath.FromSlash(strings.TrimPrefix(enclave, "/")))
	f := func(name string) string { return "file:" + filepath.Join(dir, name) }
	return `<CycloneDDS><Domain id="any"><Security>` +
		`<Authentication><Library initFunction="init_authentication" finalizeFunction="finalize_authentication" path="dds_security_auth"/>` +
		`<IdentityCA>` + f("identity_ca.cert.pem") + `</IdentityCA><IdentityCertificate>` + f("cert.pem") + `</IdentityCertificate>` +
		`<PrivateKey>` + f("key.pem") + `</PrivateKey></Authentication>` +
		`<Cryptographic><Library initFunction="init_crypto" finalizeFunction="finalize_crypto" path="dds_security_crypto"/></Cryptographic>` +
		`<AccessControl><Library initFunction="init_access_control" finalizeFunction="finalize_access_control" path="dds_security_ac"/>` +
		`<PermissionsCA>` + f("permissions_ca.cert.pem") + `</PermissionsCA><Governance>` + f("governance.p7s") + `</Governance>` +
		`<Permissions>` + f("permissions.p7s") + `</Permissions></AccessControl></Security></Domain></CycloneDDS>`
}

// With SROS2 on, cmd_vel reaches a subscriber whose enclave the same CA
// signed, encrypted, and a subscriber without security never matches.
func TestSecureTwistReachesOnlySecurePeers(t *testing.T) {
	ks := testKeystore(t, "/robot1/zerohop_agent", "/peer")
	cfg := loopbackConfig(t)
	cfg.Enclave = "/robot1/zerohop_agent"
	cfg.Security = Security{Enable: true, Keystore: ks, Enforce: true}
	sink := newTwistSink(t, cfg, zaptest.NewLogger(t))

	peerCfg := cfg
	peerCfg.XML = peerCfg.XML + "," + peerSecurity(ks, "/peer")
	secure := startPeer(t, peerCfg, "sub", "twist", "rt/cmd_vel", "reliable", "2") // stays for a second sample
	insecure := startPeer(t, cfg, "sub", "twist", "rt/cmd_vel", "reliable", "1")

	secure.expect("MATCHED")
	waitFor(t, "the secure subscriber to match", func() bool { return sink.Matched() == 1 })
	if err := sink.PublishTwist(planner.Twist{LinearX: 0.5}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := fields(secure.expect("SAMPLE")); got["lx"] != "0x1p-1" {
		t.Errorf("secure peer got %v", got)
	}
	// The insecure subscriber has had the whole exchange to match.
	time.Sleep(500 * time.Millisecond)
	select {
	case l := <-insecure.lines:
		t.Errorf("the subscriber without security printed %q", l)
	default:
	}
	if n := sink.Matched(); n != 1 {
		t.Errorf("%d subscribers matched, want only the secure one", n)
	}
}

// Enforced, a node whose enclave is not in the keystore does not start;
// permissive, it starts without security.
func TestSecurityEnforced(t *testing.T) {
	ks := testKeystore(t, "/peer")
	cfg := loopbackConfig(t)
	cfg.Enclave = "/robot1/zerohop_agent"
	cfg.Security = Security{Enable: true, Keystore: ks, Enforce: true}
	if p, err := NewParticipant(cfg, nil); err == nil || !errors.Is(err, errSecurity) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("enforced without the enclave: %v", err)
	}
	cfg.Security.Enforce = false
	p, err := NewParticipant(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal("permissive:", err)
	}
	p.Close()
}

// A subscriber whose certificates another CA signed (another keystore)
// is not authenticated: it never matches.
func TestSecurityRefusesAnotherCA(t *testing.T) {
	ours, theirs := testKeystore(t, "/robot1/zerohop_agent"), testKeystore(t, "/peer")
	cfg := loopbackConfig(t)
	cfg.Enclave = "/robot1/zerohop_agent"
	cfg.Security = Security{Enable: true, Keystore: ours, Enforce: true}
	sink := newTwistSink(t, cfg, zaptest.NewLogger(t))
	stranger := cfg
	stranger.XML = stranger.XML + "," + peerSecurity(theirs, "/peer")
	startPeer(t, stranger, "sub", "twist", "rt/cmd_vel", "reliable", "1")
	time.Sleep(2 * time.Second) // far longer than the handshake takes between peers of one CA
	if n := sink.Matched(); n != 0 {
		t.Errorf("a subscriber of another CA matched (%d)", n)
	}
}
