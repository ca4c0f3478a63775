import NIOCore
import Testing
import TrackerLogic
import TrackerRuntime

/// The runtime turns endpoints into socket addresses for every bind and every reply.
@Suite struct SocketAddressTests {
    @Test(arguments: ["127.0.0.1:6969", "10.1.2.3:1", "255.255.255.255:65535", "[::1]:6969",
                      "[2001:db8::8a2e:370:7334]:51413", "[fe80::1]:0"])
    func endpointsRoundTrip(text: String) throws {
        let endpoint = try #require(PeerEndpoint(text))
        let address = endpoint.socketAddress()
        #expect(PeerEndpoint(address) == endpoint)
        #expect(address.port == Int(endpoint.port))
        #expect(try SocketAddress(ipAddress: endpoint.ip.description, port: Int(endpoint.port)) == address)
    }
}
