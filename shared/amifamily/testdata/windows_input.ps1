<powershell>
Write-Host "Running custom user data script"
</powershell>
