/* vc_oidc_claims: the team and project of a Vercel OIDC token's payload. */
#include "check.h"

#include "providers/vercel/vercel.h"

#include <errno.h>

static void test_claims(void)
{
	char team[128], project[128];
	/* {"alg":"RS256"} . {"owner_id":"team_x","project_id":"prj_y","sub":">>>???"} . sig:
	 * the payload's base64url has '-' and '_' */
	const char *jwt =
	    "eyJhbGciOiJSUzI1NiJ9."
	    "eyJvd25lcl9pZCI6InRlYW1feCIsInByb2plY3RfaWQiOiJwcmpfeSIsInN1YiI6Ij4-Pj8_PyJ9."
	    "c2ln";
	CHECK_INT(vc_oidc_claims(jwt, team, sizeof(team), project, sizeof(project)), 0);
	CHECK_STREQ(team, "team_x");
	CHECK_STREQ(project, "prj_y");
	/* sub "??>>": two '=' of padding left out, as base64url does */
	CHECK_INT(
	    vc_oidc_claims("e30.eyJvd25lcl9pZCI6InRlYW1feCIsInByb2plY3RfaWQiOiJwcmpfeSIsInN1YiI6"
			   "Ij8_Pj4ifQ.x",
			   team, sizeof(team), project, sizeof(project)),
	    0);
	CHECK_STREQ(project, "prj_y");
	/* no project_id */
	CHECK_INT(vc_oidc_claims("e30.eyJvd25lcl9pZCI6InQifQ.x", team, sizeof(team), project,
				 sizeof(project)),
		  -EINVAL);
	/* not three parts, an empty payload, not base64, not JSON */
	CHECK_INT(vc_oidc_claims("abc", team, sizeof(team), project, sizeof(project)), -EINVAL);
	CHECK_INT(vc_oidc_claims("a..c", team, sizeof(team), project, sizeof(project)), -EINVAL);
	CHECK_INT(vc_oidc_claims("a.!!!!.c", team, sizeof(team), project, sizeof(project)),
		  -EINVAL);
	CHECK_INT(vc_oidc_claims("a.bm90IGpzb24.c", team, sizeof(team), project, sizeof(project)),
		  -EINVAL);
	/* a claim longer than the caller's buffer is refused, not cut */
	char small[4];
	CHECK_INT(vc_oidc_claims(jwt, small, sizeof(small), project, sizeof(project)), -EINVAL);
}

CHECK_MAIN(CHECK_CASE(test_claims))
