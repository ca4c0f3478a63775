import Testing
import TrackerLogic

@Suite("Connection ids")
struct ConnectionIDTests {
    /// Reference vectors from the SipHash paper (key 00…0f, message 00…(n-1)).
    @Test func sipHashReferenceVectors() throws {
        let h = SipHash24(k0: 0x0706_0504_0302_0100, k1: 0x0F0E_0D0C_0B0A_0908)
        #expect(h.hash(words: []) == 0x726F_DB47_DD0E_0E31)
        #expect(h.hash(words: [0x0706_0504_0302_0100]) == 0x93F5_F579_9A93_2462)
        #expect(h.hash(0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908) == h.hash(words: [0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908]))
    }

    let policy = ConnectionIDPolicy(key: SipHash24(k0: 11, k1: 22), lifetimeSeconds: 300, slotSeconds: 60)
    let ip = v4("192.0.2.7")

    func at(_ seconds: Int64) -> Instant { Instant(milliseconds: seconds * 1000) }

    @Test func validForAtLeastTheLifetime() throws {
        for issuedAt in stride(from: Int64(1_700_000_000), to: 1_700_000_120, by: 7) {
            let id = policy.issue(for: ip, now: at(issuedAt))
            for later in stride(from: issuedAt, through: issuedAt + 300, by: 10) {
                #expect(policy.isValid(id, for: ip, now: at(later)), "issued \(issuedAt), checked \(later)")
            }
            #expect(!policy.isValid(id, for: ip, now: at(issuedAt + 360 + 60)), "expired by lifetime + one slot")
        }
    }

    @Test func bep15MinimumIsEnforced() throws {
        let short = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 1), lifetimeSeconds: 10)
        let id = short.issue(for: ip, now: at(1000))
        #expect(short.isValid(id, for: ip, now: at(1120)))
    }

    @Test func boundToTheSourceAddressAndKey() throws {
        let id = policy.issue(for: ip, now: at(5000))
        #expect(!policy.isValid(id, for: v4("192.0.2.8"), now: at(5000)))
        #expect(!policy.isValid(id ^ 0x1000, for: ip, now: at(5000)))
        let other = ConnectionIDPolicy(key: SipHash24(k0: 11, k1: 23))
        #expect(!other.isValid(id, for: ip, now: at(5000)))
        let v6 = IPAddress("2001:db8::7")!
        let id6 = policy.issue(for: v6, now: at(5000))
        #expect(policy.isValid(id6, for: v6, now: at(5001)))
        #expect(!policy.isValid(id6, for: ip, now: at(5001)))
    }

    @Test func anotherNodeWithTheSameKeyAcceptsIt() throws {
        let twin = ConnectionIDPolicy(key: SipHash24(k0: 11, k1: 22), lifetimeSeconds: 300, slotSeconds: 60)
        let id = policy.issue(for: ip, now: at(9000))
        #expect(twin.isValid(id, for: ip, now: at(9030)))
        // A twin whose clock is a little behind still accepts it.
        #expect(twin.isValid(id, for: ip, now: at(8990)))
    }

    @Test func slotWrapAroundDoesNotResurrectOldIds() throws {
        let id = policy.issue(for: ip, now: at(0))
        // 256 slots later the low byte repeats; the hash must still reject it.
        #expect(!policy.isValid(id, for: ip, now: at(256 * 60)))
    }
}

@Suite("Addresses")
struct AddressTests {
    @Test func parsesAndPrints() throws {
        #expect(IPAddress("127.0.0.1") == .v4(0x7F00_0001))
        #expect(IPAddress("::1") == .v6(0, 1))
        #expect(IPAddress("[::1]") == .v6(0, 1))
        #expect(IPAddress("2001:db8::1")?.description == "2001:db8::1")
        #expect(IPAddress("::ffff:10.0.0.1")?.unmapped == .v4(0x0A00_0001))
        #expect(IPAddress("1:2:3:4:5:6:7:8")?.description == "1:2:3:4:5:6:7:8")
        for bad in ["", "1.2.3", "256.1.1.1", "1::2::3", "12345::", "a.b.c.d", "1:2:3:4:5:6:7:8:9"] {
            #expect(IPAddress(bad) == nil, "\(bad)")
        }
        #expect(PeerEndpoint("127.0.0.1:6969") == PeerEndpoint(ip: .v4(0x7F00_0001), port: 6969))
        #expect(PeerEndpoint("[::1]:6969")?.description == "[::1]:6969")
        #expect(PeerEndpoint("::1:6969") == nil)
    }
}
