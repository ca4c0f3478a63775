import Foundation
import TrackerLogic

/// The body of `POST /api/access/rules`: `{"rule": "allow" | "deny" | "remove",
/// "infoHashes": [40 hex digits, …]}`, as the catalogue change it asks for. Anything
/// else (another rule, a hash that is not forty hex digits, no hashes, too many) is nil:
/// the API answers 400 and nothing is submitted.
struct AccessRulesRequest: Codable {
    var rule: String
    var infoHashes: [String]

    static func change(_ body: Data) -> CatalogueChange? {
        guard let request = try? JSONDecoder().decode(Self.self, from: body),
              (1...AccessPolicy.maxHashesPerChange).contains(request.infoHashes.count) else { return nil }
        var hashes: [InfoHash] = []
        for text in request.infoHashes {
            guard let hash = InfoHash(hex: text) else { return nil }
            hashes.append(hash)
        }
        switch request.rule {
        case "allow": return .setAccessRule(.allow, hashes)
        case "deny": return .setAccessRule(.deny, hashes)
        case "remove": return .removeAccessRules(hashes)
        default: return nil
        }
    }
}
