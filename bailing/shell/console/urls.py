"""Console routes (/console/): the shell's own pages, then every app's console pages, all in the
``console`` namespace (so a page is ``console:<name>`` whichever app serves it)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from agent_runtime.console import urls as agent_runtime_urls
from approvals.console import urls as approvals_urls
from bailing.shell.console import dashboard, login, users
from knowledge.console import urls as knowledge_urls

app_name = "console"

urlpatterns = [
    path("", dashboard.DashboardView.as_view(), name="dashboard"),
    path("login/", login.ConsoleLoginView.as_view(), name="login"),
    # Django's LogoutView accepts POST only: a link or an image tag cannot sign anyone out.
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("users/", users.UserListView.as_view(), name="user_list"),
    # "_new" is no valid username start for the console's own pages, as for clients.
    path("users/_new/", users.UserCreateView.as_view(), name="user_create"),
    path("users/<segment:username>/", users.UserDetailView.as_view(), name="user_detail"),
    path("users/<segment:username>/password/", users.UserPasswordView.as_view(), name="user_password"),
    path("users/<segment:username>/deactivate/", users.UserDeactivateView.as_view(), name="user_deactivate"),
    path("users/<segment:username>/reactivate/", users.UserReactivateView.as_view(), name="user_reactivate"),
    *agent_runtime_urls.urlpatterns,
    *knowledge_urls.urlpatterns,
    *approvals_urls.urlpatterns,
]
