// The OpenID provider the single sign-on tests sign in through: oidc-provider (the certified
// Node.js implementation), unchanged, with one confidential client and three users in groups.
// Its development login form takes any password. Each start signs with a new RSA key named by
// the key id given, so that starting it again with another id rotates its keys.
//
//   node idp.mjs PORT KID CLIENT_ID CLIENT_SECRET REDIRECT_URI POST_LOGOUT_URI
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

const [port, kid, clientId, clientSecret, redirectUri, postLogoutUri] = process.argv.slice(2);

const users = {
  alice: { email: 'alice@example.com', groups: ['platform-admins'] },
  bob: { email: 'bob@example.com', groups: ['team-a'] },
  carol: { email: 'carol@example.com', groups: ['contractors'] },
};

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const key = { ...privateKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' };

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    post_logout_redirect_uris: [postLogoutUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  // PKCE for every client, not only public ones: the gateway sends it.
  pkce: { required: () => true },
  jwks: { keys: [key] },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
  // The claims the scopes ask for go into the ID token itself, as Keycloak, Entra ID and Okta
  // put email and groups there.
  conformIdTokenClaims: false,
  findAccount: (_ctx, id) => users[id] && {
    accountId: id,
    claims: () => ({ sub: id, email: users[id].email, email_verified: true, groups: users[id].groups }),
  },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  cookies: { keys: ['a-cookie-key-of-the-test-provider'] },
});

provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`oidc-provider listening on http://127.0.0.1:${port} signing with ${kid}`);
});
