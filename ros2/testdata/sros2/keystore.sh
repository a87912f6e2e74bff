#!/usr/bin/env bash
# keystore.sh KEYSTORE ENCLAVE... makes an SROS2 keystore for tests, laid
# out as `ros2 security create_keystore` and `create_enclave` lay it out
# (KEYSTORE/enclaves/<enclave>/{identity_ca.cert.pem, cert.pem, key.pem,
# permissions_ca.cert.pem, governance.p7s, permissions.p7s}), with OpenSSL
# alone: one prime256v1 CA for identities and permissions, each enclave's
# certificate with subject CN=<enclave>, a governance that encrypts every
# topic and a permissions document that lets the enclave join domains
# 0-230 and publish and subscribe to anything. Test material only: the CA
# key is kept beside it, unprotected.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: keystore.sh KEYSTORE ENCLAVE..." >&2; exit 1; }
ks="$1"; shift
mkdir -p "$ks/public" "$ks/private" "$ks/enclaves"
ca_key="$ks/private/ca.key.pem" ca="$ks/public/ca.cert.pem"
if [ ! -f "$ca" ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out "$ca_key" 2>/dev/null
  openssl req -x509 -new -key "$ca_key" -out "$ca" -days 3650 -subj "/CN=zerohop test CA" 2>/dev/null
fi
cat >"$ks/enclaves/governance.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_governance.xsd">
  <domain_access_rules>
    <domain_rule>
      <domains><id_range><min>0</min><max>230</max></id_range></domains>
      <allow_unauthenticated_participants>false</allow_unauthenticated_participants>
      <enable_join_access_control>true</enable_join_access_control>
      <discovery_protection_kind>ENCRYPT</discovery_protection_kind>
      <liveliness_protection_kind>ENCRYPT</liveliness_protection_kind>
      <rtps_protection_kind>SIGN</rtps_protection_kind>
      <topic_access_rules>
        <topic_rule>
          <topic_expression>*</topic_expression>
          <enable_discovery_protection>true</enable_discovery_protection>
          <enable_liveliness_protection>true</enable_liveliness_protection>
          <enable_read_access_control>true</enable_read_access_control>
          <enable_write_access_control>true</enable_write_access_control>
          <metadata_protection_kind>ENCRYPT</metadata_protection_kind>
          <data_protection_kind>ENCRYPT</data_protection_kind>
        </topic_rule>
      </topic_access_rules>
    </domain_rule>
  </domain_access_rules>
</dds>
XML
openssl smime -sign -in "$ks/enclaves/governance.xml" -text -out "$ks/enclaves/governance.p7s" -signer "$ca" -inkey "$ca_key"
# Valid from yesterday for ten years (UTC), whenever the tests run.
not_before="$(date -u -d '-1 day' +%Y-%m-%dT%H:%M:%S)"
not_after="$(date -u -d '+10 years' +%Y-%m-%dT%H:%M:%S)"
for enclave in "$@"; do
  dir="$ks/enclaves${enclave}"
  mkdir -p "$dir"
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/key.pem" 2>/dev/null
  # -subj separates with '/': the enclave's own slashes are escaped.
  openssl req -new -key "$dir/key.pem" -out "$dir/req.csr" -subj "/CN=${enclave//\//\\/}"
  openssl x509 -req -in "$dir/req.csr" -CA "$ca" -CAkey "$ca_key" -CAcreateserial -CAserial "$ks/private/ca.srl" -days 3650 -out "$dir/cert.pem" 2>/dev/null
  rm -f "$dir/req.csr"
  # Relative links to the shared files, as sros2 makes them.
  up="$(realpath --relative-to="$dir" "$ks")"
  ln -sf "$up/public/ca.cert.pem" "$dir/identity_ca.cert.pem"
  ln -sf "$up/public/ca.cert.pem" "$dir/permissions_ca.cert.pem"
  ln -sf "$up/enclaves/governance.p7s" "$dir/governance.p7s"
  subject="$(openssl x509 -noout -subject -nameopt RFC2253 -in "$dir/cert.pem")"
  subject="${subject#subject=}"
  cat >"$dir/permissions.xml" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_permissions.xsd">
  <permissions>
    <grant name="${enclave}">
      <subject_name>${subject}</subject_name>
      <validity><not_before>${not_before}</not_before><not_after>${not_after}</not_after></validity>
      <allow_rule>
        <domains><id_range><min>0</min><max>230</max></id_range></domains>
        <publish><topics><topic>*</topic></topics></publish>
        <subscribe><topics><topic>*</topic></topics></subscribe>
      </allow_rule>
      <default>DENY</default>
    </grant>
  </permissions>
</dds>
XML
  openssl smime -sign -in "$dir/permissions.xml" -text -out "$dir/permissions.p7s" -signer "$ca" -inkey "$ca_key"
done
