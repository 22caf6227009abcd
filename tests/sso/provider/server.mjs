// A real OpenID Provider for Threadline's SSO tests: the certified `oidc-provider` package,
// configured, never mocked. Started by tests/sso/provider.py; everything it needs comes from
// the environment:
//   OP_PORT          port on 127.0.0.1 (the issuer is http://127.0.0.1:OP_PORT)
//   OP_CLIENTS       JSON list of client registrations (client_id, client_secret,
//                    redirect_uris, and our own `id_token_ttl` in seconds)
//   OP_ACCOUNTS      path of a JSON file {e-mail: {"groups": [...], "email_verified": bool}},
//                    read at every sign-in so a test can change a user's groups between two
//   OP_KID           key id of the signing key, a fresh RSA key made at each start: a restart
//                    with another OP_KID is a key rotation
//   OP_CLOCK_OFFSET  seconds added to this provider's clock (optional): a provider whose clock
//                    is behind issues ID tokens that are already expired where they arrive
//
// The only test-specific policy is the interaction: the end-user is whoever the relying party
// names in `login_hint` (no login form to fill), and first-party consent is implied. The
// authorization, token, discovery and JWKS endpoints are the package's own.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";

import Provider from "oidc-provider";

const offsetMs = Number(process.env.OP_CLOCK_OFFSET ?? 0) * 1000;
if (offsetMs) {
  const realNow = Date.now;
  Date.now = () => realNow() + offsetMs;
}

const port = Number(process.env.OP_PORT);
const issuer = `http://127.0.0.1:${port}`;
const clients = JSON.parse(process.env.OP_CLIENTS);
const ttlByClient = Object.fromEntries(clients.map((c) => [c.client_id, c.id_token_ttl ?? 3600]));
const accountsFile = process.env.OP_ACCOUNTS;

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: "jwk" }), kid: process.env.OP_KID, use: "sig", alg: "RS256" };

function account(email) {
  const accounts = JSON.parse(readFileSync(accountsFile, "utf8"));
  return accounts[email] ?? {};
}

const provider = new Provider(issuer, {
  clients: clients.map(({ id_token_ttl, ...registration }) => ({
    grant_types: ["authorization_code"],
    response_types: ["code"],
    ...registration,
  })),
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString("hex")] },
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["name"],
    groups: ["groups"],
  },
  scopes: ["openid", "email", "profile", "groups"],
  // The ID token carries the scopes' claims, as Entra ID, Okta and Keycloak can be set to do.
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: false } },
  ttl: {
    IdToken: (ctx, token, client) => ttlByClient[client.clientId] ?? 3600,
    AuthorizationCode: 60,
    AccessToken: 600,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
  },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        const found = account(id);
        return {
          sub: id,
          email: id,
          email_verified: found.email_verified ?? true,
          name: id.split("@")[0],
          groups: found.groups ?? [],
        };
      },
    };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope("openid email profile groups");
    await grant.save();
    return grant;
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

provider.use(async (ctx, next) => {
  const match = ctx.path.match(/^\/interaction\/([^/]+)$/);
  if (!match) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const hint = details.params.login_hint;
  if (details.prompt.name !== "login" || typeof hint !== "string" || !hint.includes("@")) {
    ctx.status = 400;
    ctx.body = `this test provider signs in the login_hint only (prompt ${details.prompt.name})`;
    return undefined;
  }
  return provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: hint } }, { mergeWithLastSubmission: false });
});

provider.listen(port, "127.0.0.1", () => {
  process.stdout.write(`listening ${issuer}\n`);
});
