import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from promsched.sandbox.control_plane.certifying import KUBERNETES_SERVICE_IP, issue


def test_leaf_certificates_are_signed_by_the_ca_and_name_what_clients_use(tmp_path: Path) -> None:
    pki = issue(tmp_path)
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    serving = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    admin = x509.load_pem_x509_certificate(pki.admin_cert.read_bytes())
    for leaf in (serving, admin):
        leaf.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address(KUBERNETES_SERVICE_IP) in sans.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    organizations = admin.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)
    assert [o.value for o in organizations] == ["system:masters"]
    assert pki.admin_key.stat().st_mode & 0o077 == 0
    assert isinstance(load_pem_public_key(pki.service_account_pub.read_bytes()), ec.EllipticCurvePublicKey)
